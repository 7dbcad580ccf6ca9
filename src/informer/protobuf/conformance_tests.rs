//! Every built-in kind written as JSON from its protobuf exactly as client-go writes it: random objects of each kind from apimachinery's fuzzer, made by `hack/proto-schema corpus`, whose path `hack/test` passes in `$WQS_PROTO_CORPUS`.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::Value;

use kube::api::{ApiResource, GroupVersionKind};

use super::ProtobufKind;
use crate::informer::shaping::Shaping;
use crate::informer::spec::{IndexBy, IndexSpec};

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

/// Whether the object stored from its protobuf (`ProtobufKind::to_object`
/// and `Shaping::shape_written`) differs from the one stored from
/// client-go's JSON of it (`Shaping::shape`): key, parsed metadata, index
/// values or JSON.
fn stored_differently(
    api_version: &str,
    kind_name: &str,
    kind: ProtobufKind,
    message: &[u8],
    json: &Value,
) -> Option<String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind_name);
    let indexes = vec![
        IndexSpec { name: "ns".into(), by: IndexBy::Namespace },
        IndexSpec { name: "owner".into(), by: IndexBy::Owner },
        IndexSpec { name: "generate".into(), by: IndexBy::Field("metadata.generateName".into()) },
    ];
    let shaping = Shaping::new(&ApiResource::from_gvk(&gvk), true, indexes);
    let from_json = shaping.shape(json.to_string().as_bytes());
    let written = kind.to_object(message, shaping.types_json(), true).ok()?;
    let from_protobuf = shaping.shape_written(&written.json, written.metadata);
    match (from_json, from_protobuf) {
        (Ok(a), Ok(b)) if (&a.key, &a.meta, &a.index_values) != (&b.key, &b.meta, &b.index_values) => {
            Some(format!("stored apart: from JSON {:?} {:?}, from protobuf {:?} {:?}", a.key, a.meta, b.key, b.meta))
        }
        (Ok(a), Ok(b)) => {
            let (a, b): (Value, Value) = (serde_json::from_slice(&a.json).ok()?, serde_json::from_slice(&b.json).ok()?);
            first_difference("(stored)", &b, &a)
        }
        (a, b) => Some(format!("stored from JSON: {:?}, from protobuf: {:?}", a.err(), b.err())),
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
            Ok(Ok(ours)) => first_difference("", &ours, &case.json)
                .or_else(|| stored_differently(&case.api_version, &case.kind, kind, &message, &case.json)),
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
