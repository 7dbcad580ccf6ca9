//! Informer metrics, read from the informers at scrape time: changes handed to the queues by type, and lists.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::informer::{ChangeKind, SharedInformer};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InformerLabel {
    informer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChangeLabels {
    informer: String,
    r#type: &'static str,
}

/// Encodes the informers' own counters on each scrape: they count with
/// plain atomics on their hot path and know nothing of Prometheus.
pub struct InformerCollector {
    informers: Vec<Arc<SharedInformer>>,
}

impl InformerCollector {
    pub fn new(informers: Vec<Arc<SharedInformer>>) -> Self {
        InformerCollector { informers }
    }
}

impl std::fmt::Debug for InformerCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.informers.iter().map(|i| i.name())).finish()
    }
}

impl Collector for InformerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if self.informers.is_empty() {
            return Ok(());
        }
        let mut events = encoder.encode_descriptor(
            "workqueue_sidecar_informer_events",
            "Changes an informer applied to its cache and handed to its queues (every queue's Add returned), \
             by type: initial_list, added, updated, deleted",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for informer in &self.informers {
            for kind in ChangeKind::ALL {
                let labels = ChangeLabels { informer: informer.name().to_string(), r#type: kind.as_str() };
                ConstCounter::new(informer.changes(kind)).encode(events.encode_family(&labels)?)?;
            }
        }
        let mut lists = encoder.encode_descriptor(
            "workqueue_sidecar_informer_lists",
            "Lists an informer completed: 1 after the first, one more per relist (after a 410 or a broken watch)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for informer in &self.informers {
            let labels = InformerLabel { informer: informer.name().to_string() };
            ConstCounter::new(informer.lists_done()).encode(lists.encode_family(&labels)?)?;
        }
        let mut listed = encoder.encode_descriptor(
            "workqueue_sidecar_informer_objects_listed",
            "Objects an informer received in lists: its first list, relists, and for a sharded informer the \
             lists of the shard slots it gained (a change of slots lists only those)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for informer in &self.informers {
            let labels = InformerLabel { informer: informer.name().to_string() };
            ConstCounter::new(informer.objects_listed()).encode(listed.encode_family(&labels)?)?;
        }
        let mut protobuf = encoder.encode_descriptor(
            "workqueue_sidecar_informer_protobuf_objects",
            "Objects an informer read as protobuf, in lists and watch events (built-in kinds); its other \
             objects came as JSON. It stops growing when protobuf the sidecar cannot read in full (a field \
             newer than its table) sends the informer back to JSON",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for informer in &self.informers {
            let labels = InformerLabel { informer: informer.name().to_string() };
            ConstCounter::new(informer.objects_read_as_protobuf()).encode(protobuf.encode_family(&labels)?)?;
        }
        let mut refused = encoder.encode_descriptor(
            "workqueue_sidecar_informer_keys_refused",
            "Keys an informer's changes mapped to that a queue refused because it was shutting down \
             (a queue's max_keys never refuses keys from an informer)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for informer in &self.informers {
            let labels = InformerLabel { informer: informer.name().to_string() };
            ConstCounter::new(informer.keys_refused()).encode(refused.encode_family(&labels)?)?;
        }
        let mut stale = encoder.encode_descriptor(
            "workqueue_sidecar_informer_stale_seconds",
            "How long the informer's list or watch has been failing with no success since (0 while current): \
             changes made meanwhile may be missing from its cache",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for informer in &self.informers {
            let labels = InformerLabel { informer: informer.name().to_string() };
            ConstGauge::new(informer.stale_for().as_secs_f64()).encode(stale.encode_family(&labels)?)?;
        }
        let mut objects = encoder.encode_descriptor(
            "workqueue_sidecar_informer_objects",
            "Objects in the informer's cache (for a sharded informer: those of this replica's shard slots)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for informer in &self.informers {
            let labels = InformerLabel { informer: informer.name().to_string() };
            let count = i64::try_from(informer.len()).unwrap_or(i64::MAX);
            ConstGauge::new(count).encode(objects.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::informer::{InformerSpec, InformerWriter};

    #[test]
    fn collector_should_expose_each_informers_changes_by_type_and_its_lists() {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut writer = InformerWriter::new(InformerSpec::new("cms", "", "v1", "ConfigMap"), resource.clone(), true);
        writer.on_init();
        writer.on_list_done();
        for version in ["1", "2", "3"] {
            let json =
                serde_json::json!({ "metadata": { "name": "a", "namespace": "ns", "resourceVersion": version } });
            let object = writer.shape(json.to_string().as_bytes()).unwrap();
            writer.on_applied(object);
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(InformerCollector::new(vec![writer.informer().clone()])));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for sample in [
            r#"workqueue_sidecar_informer_events_total{informer="cms",type="initial_list"} 0"#,
            r#"workqueue_sidecar_informer_events_total{informer="cms",type="added"} 1"#,
            r#"workqueue_sidecar_informer_events_total{informer="cms",type="updated"} 2"#,
            r#"workqueue_sidecar_informer_events_total{informer="cms",type="deleted"} 0"#,
            r#"workqueue_sidecar_informer_lists_total{informer="cms"} 1"#,
            r#"workqueue_sidecar_informer_keys_refused_total{informer="cms"} 0"#,
            r#"workqueue_sidecar_informer_stale_seconds{informer="cms"} 0.0"#,
        ] {
            assert!(text.lines().any(|line| line == sample), "{sample} missing from:\n{text}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn stale_seconds_should_count_from_the_first_failure_until_the_next_success() {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let writer = InformerWriter::new(InformerSpec::new("cms", "", "v1", "ConfigMap"), resource, true);
        let informer = writer.informer();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(InformerCollector::new(vec![informer.clone()])));
        let stale = |registry: &Registry| {
            let mut text = String::new();
            encode(&mut text, registry).unwrap();
            let line = text.lines().find(|l| l.starts_with("workqueue_sidecar_informer_stale_seconds{")).unwrap();
            line.rsplit(' ').next().unwrap().parse::<f64>().unwrap()
        };
        informer.on_watch_error();
        tokio::time::advance(std::time::Duration::from_secs(12)).await;
        informer.on_watch_error();
        tokio::time::advance(std::time::Duration::from_secs(8)).await;
        assert_eq!(stale(&registry), 20.0, "counted from the first of the failures");
        informer.on_watch_progress();
        assert_eq!(stale(&registry), 0.0);
    }

    #[test]
    fn collector_should_expose_nothing_without_informers() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(InformerCollector::new(Vec::new())));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(!text.contains("informer"), "{text}");
    }
}
