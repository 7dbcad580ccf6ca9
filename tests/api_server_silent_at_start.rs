//! A sidecar whose API server accepts its connection and then says nothing while the sidecar
//! resolves its informers: each attempt is given up after 30 s (`informer/resolve.rs`'s bound) and
//! tried again, with a line saying why, instead of waiting out the client's read timeout (295 s)
//! with nothing said. The "API server" is a listener that reads and never answers: a frozen server
//! past the connection and TLS (which the test proxy's hang cannot give: the client's connect
//! timeout, also 30 s, would fire first and the test could not tell the two apart).

#[path = "support/sidecar.rs"]
mod sidecar;

use std::time::{Duration, Instant};

use sidecar::Starting;
use tokio::io::AsyncReadExt;

/// The attempt's bound (30 s), and slack for a loaded machine.
const SAID_WITHIN: Duration = Duration::from_secs(50);

/// Accepts every connection and reads what it is sent, answering nothing; counts the requests' first reads.
async fn silent_server() -> (u16, tokio::sync::watch::Receiver<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (read_tx, read_rx) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let read_tx = read_tx.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let mut counted = false;
                while let Ok(n) = socket.read(&mut buffer).await {
                    if n == 0 {
                        return;
                    }
                    if !counted {
                        counted = true;
                        read_tx.send_modify(|reads| *reads += 1);
                    }
                }
            });
        }
    });
    (port, read_rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_whose_api_server_is_silent_at_start_should_give_each_attempt_up_and_say_so() {
    let (port, mut requests) = silent_server().await;
    let dir = std::env::temp_dir().join(format!("wqs-silent-api-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: silent\n\
             clusters: [{{name: silent, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\n\
             users: [{{name: anyone, user: {{}}}}]\n\
             contexts: [{{name: silent, context: {{cluster: silent, user: anyone}}}}]\n"
        ),
    )
    .unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(&config, "informers:\n  cms: { version: v1, kind: ConfigMap }\nqueues:\n  q: { primary: cms }\n")
        .unwrap();

    let starting =
        Starting::spawn(&["--config", config.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()]);
    tokio::time::timeout(Duration::from_secs(10), requests.wait_for(|reads| *reads >= 1))
        .await
        .unwrap_or_else(|_| panic!("the sidecar sent the API server nothing; logs:\n{}", starting.logs()))
        .unwrap();
    let started = Instant::now();
    let said = |logs: &str| {
        logs.lines().any(|line| line.contains("waiting for the API server") && line.contains("no answer within 30s"))
    };
    while !said(&starting.logs()) {
        assert!(
            started.elapsed() < SAID_WITHIN,
            "no line within {SAID_WITHIN:?} that the attempt was given up; logs:\n{}",
            starting.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("the first attempt was given up {:.1} s after its request", started.elapsed().as_secs_f64());
    // And tried again: another request reaches the server.
    tokio::time::timeout(Duration::from_secs(30), requests.wait_for(|reads| *reads >= 2))
        .await
        .unwrap_or_else(|_| panic!("the attempt was not tried again; logs:\n{}", starting.logs()))
        .unwrap();
    drop(starting);
    let _ = std::fs::remove_dir_all(&dir);
}
