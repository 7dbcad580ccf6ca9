//! Every task the sidecar runs, by name: one that ends before it should is noticed and logged, and ends the process.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::task::{AbortHandle, Id, JoinSet};
use tracing::{debug, error, warn};

/// What a task is, which says what its end means.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Runs until the sidecar's stop signal, then ends by itself (a server);
    /// its end before the stop is a failure.
    Service,
    /// Runs until aborted at the stop (a watch, a timer); its end before
    /// the stop is a failure.
    Background,
    /// Ends by itself once done (a readiness condition, a queue's gate);
    /// aborted at the stop if not done.
    Step,
}

/// How a task ended.
struct Ended {
    name: String,
    kind: Kind,
    result: anyhow::Result<()>,
}

/// The sidecar's tasks; dropping it aborts whatever still runs.
#[derive(Default)]
pub struct Tasks {
    set: JoinSet<Ended>,
    /// Name and kind by task id, for a task that panicked or was aborted.
    running: HashMap<Id, (String, Kind, AbortHandle)>,
    /// Set by `finish`: from then on, aborting a background task or a step is expected.
    stopping: bool,
}

impl Tasks {
    /// Spawns a service: it runs until the sidecar's stop signal, then ends.
    pub fn service<F>(&mut self, name: impl Into<String>, future: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.spawn(name.into(), Kind::Service, future);
    }

    /// Spawns a background task: it runs until aborted at the stop.
    pub fn background(&mut self, name: impl Into<String>, future: impl Future<Output = ()> + Send + 'static) {
        self.spawn(name.into(), Kind::Background, future.map(Ok));
    }

    /// Spawns a step: it ends by itself once done.
    pub fn step(&mut self, name: impl Into<String>, future: impl Future<Output = ()> + Send + 'static) {
        self.spawn(name.into(), Kind::Step, future.map(Ok));
    }

    fn spawn<F>(&mut self, name: String, kind: Kind, future: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let task_name = name.clone();
        let handle = self.set.spawn(async move { Ended { name: task_name, kind, result: future.await } });
        self.running.insert(handle.id(), (name, kind, handle));
    }

    /// Waits until a service ends or fails (steps that end are logged and
    /// skipped), and says which and why; pending for as long as all is well.
    pub async fn failure(&mut self) -> anyhow::Error {
        loop {
            let Some(joined) = self.set.join_next_with_id().await else {
                return std::future::pending().await;
            };
            match self.ended(joined) {
                Ended { kind: Kind::Step, result: Ok(()), name } => debug!(task = %name, "done"),
                Ended { name, result: Ok(()), .. } => {
                    return anyhow::anyhow!("task {name} ended while the sidecar runs");
                }
                Ended { name, result: Err(err), .. } => return err.context(format!("task {name} failed")),
            }
        }
    }

    /// After the stop signal: aborts background tasks and unfinished steps,
    /// waits up to `within` for the services to end, then aborts the rest,
    /// naming them. The first service that failed is the error.
    pub async fn finish(mut self, within: Duration) -> anyhow::Result<()> {
        self.stopping = true;
        for (_, kind, handle) in self.running.values() {
            if *kind != Kind::Service {
                handle.abort();
            }
        }
        let mut first_failure = None;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.set.join_next_with_id()).await {
                Ok(None) => break,
                Ok(Some(joined)) => {
                    if let Ended { name, result: Err(err), .. } = self.ended(joined) {
                        error!(task = %name, "{err:#}");
                        first_failure.get_or_insert(err.context(format!("task {name} failed")));
                    }
                }
                Err(_) => {
                    let mut left: Vec<_> = self.running.values().map(|(name, ..)| name.clone()).collect();
                    left.sort();
                    warn!(after = ?within, tasks = ?left, "tasks still running after the stop; aborting them");
                    self.set.abort_all();
                    break;
                }
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// What a joined task's end means.
    fn ended(&mut self, joined: Result<(Id, Ended), tokio::task::JoinError>) -> Ended {
        match joined {
            Ok((id, ended)) => {
                self.running.remove(&id);
                ended
            }
            Err(err) => {
                let (name, kind) = match self.running.remove(&err.id()) {
                    Some((name, kind, _)) => (name, kind),
                    None => ("unnamed".into(), Kind::Service),
                };
                let result = match (err.is_panic(), self.stopping && kind != Kind::Service) {
                    (true, _) => Err(anyhow::anyhow!("panicked")),
                    (false, true) => Ok(()),
                    (false, false) => Err(anyhow::anyhow!("was aborted")),
                };
                Ended { name, kind, result }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn failure_should_name_a_service_that_ends_and_skip_steps_that_do() {
        let mut tasks = Tasks::default();
        tasks.step("a step", async {});
        tasks.service("a service", async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(())
        });
        tasks.service("a long service", std::future::pending());
        let err = tasks.failure().await;
        assert_eq!(err.to_string(), "task a service ended while the sidecar runs");
    }

    #[tokio::test]
    async fn failure_should_name_a_panicked_task() {
        let mut tasks = Tasks::default();
        tasks.service("fragile", async { panic!("boom") });
        let err = tasks.failure().await;
        assert_eq!(format!("{err:#}"), "task fragile failed: panicked");
    }

    #[tokio::test]
    async fn finish_should_abort_what_outlives_the_stop_and_report_failures() {
        let mut tasks = Tasks::default();
        tasks.service("stuck", std::future::pending());
        tasks.service("broken", async { Err(anyhow::anyhow!("disk full")) });
        let err = tasks.finish(Duration::from_millis(50)).await.unwrap_err();
        assert_eq!(format!("{err:#}"), "task broken failed: disk full");
    }
}
