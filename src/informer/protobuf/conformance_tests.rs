//! Every built-in kind written as JSON from its protobuf exactly as client-go writes it: random objects of each kind from apimachinery's fuzzer, made by `hack/proto-schema corpus`, whose path `hack/test` passes in `$WQS_PROTO_CORPUS`.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::Value;

use super::ProtobufKind;

const CORPUS_ENV: &str = "WQS_PROTO_CORPUS";

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    api_version: String,
    kind: String,
    protobuf: String,
    json: Value,
}

/// The first place two JSON values differ, as a path.
fn first_difference(path: &str, ours: &Value, theirs: &Value) -> Option<String> {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            if let Some(key) = b.keys().find(|key| !a.contains_key(*key)) {
                return Some(format!("{path}.{key}: ours missing, client-go's {}", b[key]));
            }
            a.iter().find_map(|(key, x)| match b.get(key) {
                None => Some(format!("{path}.{key}: ours {x}, client-go's missing")),
                Some(y) => first_difference(&format!("{path}.{key}"), x, y),
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y))
        }
        _ if ours == theirs => None,
        _ => Some(format!("{path}: ours {ours}, client-go's {theirs}")),
    }
}

#[test]
#[ignore = "needs the corpus hack/test makes with Go ($WQS_PROTO_CORPUS)"]
fn every_kind_should_be_written_as_client_go_writes_it() {
    let Some(path) = std::env::var_os(CORPUS_ENV) else {
        panic!("{CORPUS_ENV} is not set: run hack/test, or `go run ./hack/proto-schema corpus > F` and set it to F")
    };
    let corpus = std::fs::read_to_string(&path).expect("the corpus is readable");
    let mut checked = BTreeMap::<(String, String), usize>::new();
    let mut failures = Vec::new();
    for line in corpus.lines() {
        let case: Case = serde_json::from_str(line).expect("a corpus line");
        let message = base64::engine::general_purpose::STANDARD.decode(&case.protobuf).unwrap();
        let kind = ProtobufKind::of(&case.api_version, &case.kind).unwrap_or_else(|| {
            panic!("{} {} is in the corpus but not the table: regenerate both", case.api_version, case.kind)
        });
        let ours = kind.to_json(&message).map(|json| serde_json::from_slice::<Value>(&json));
        let difference = match ours {
            Ok(Ok(ours)) => first_difference("", &ours, &case.json),
            Ok(Err(err)) => Some(format!("not JSON: {err}")),
            Err(err) => Some(format!("not read: {err}")),
        };
        if let Some(difference) = difference {
            failures.push(format!("{} {}: {difference}", case.api_version, case.kind));
        }
        *checked.entry((case.api_version, case.kind)).or_default() += 1;
    }
    assert!(checked.len() > 100, "only {} kinds in the corpus", checked.len());
    assert!(
        failures.is_empty(),
        "{} of {} objects differ from client-go's JSON; the first 20:\n{}",
        failures.len(),
        checked.values().sum::<usize>(),
        failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
