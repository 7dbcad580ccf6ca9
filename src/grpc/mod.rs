//! The gRPC face of the sidecar: the WorkQueue, Cache and Object services, health and reflection, as one set of routes.
//!
//! Handlers are thin: validate the request, call the queue, convert the
//! answer. `status.rs` is the one place where errors become status codes.

mod bounded_text;
mod cache_service;
mod codec;
mod convert;
mod object_service;
mod page_token;
pub mod pb;
mod status;
mod validate;
mod work_stream;
mod workqueue_service;

use std::sync::Arc;

use tonic::service::Routes;
use tonic_health::server::HealthReporter;

pub use cache_service::{CacheApi, DEFAULT_PAGE_SIZE, MAX_CACHE_WAIT, MAX_PAGE_SIZE};
pub use object_service::ObjectApi;
pub use status::ApiError;
pub use validate::{MAX_BATCH_KEYS, MAX_GET_KEYS, MAX_GET_WAIT, MAX_KEY_BYTES};
pub use work_stream::MAX_CREDITS;
pub use workqueue_service::{ShutDownRpc, WorkQueueApi};

use crate::informer::InformerRegistry;
use crate::queue_registry::QueueRegistry;
use crate::writes::{DeclaredFinalizers, Writes};
use pb::cache_service_server::CacheServiceServer;
use pb::object_service_server::ObjectServiceServer;
use pb::work_queue_service_server::WorkQueueServiceServer;

/// Largest message accepted or sent: a batch of `MAX_BATCH_KEYS` keys of
/// `MAX_KEY_BYTES` each is about 10 MiB, so 16 MiB leaves room for framing.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Largest ObjectService request: the API server refuses a body over 3 MiB
/// (its etcd request limit is 1.5 MiB), so nothing larger could be written;
/// 64 KiB more for the request's other fields. Refused from the message's
/// length prefix, before it is read, as OUT_OF_RANGE (tonic's code for it).
pub const MAX_WRITE_MESSAGE_BYTES: usize = 3 * 1024 * 1024 + 64 * 1024;

/// The full set of gRPC services, and the health reporter that flips them.
pub struct Api {
    pub routes: Routes,
    pub health: HealthReporter,
    /// Every method `routes` serves, as its path `/package.Service/Method`.
    pub methods: Vec<String>,
}

/// The descriptors of every service the routes serve: ours, health, and reflection v1 and v1alpha.
const SERVED_DESCRIPTOR_SETS: [&[u8]; 4] = [
    pb::FILE_DESCRIPTOR_SET,
    tonic_health::pb::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
    tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
];

/// The paths (`/package.Service/Method`) of every method in `SERVED_DESCRIPTOR_SETS`.
fn served_methods() -> Vec<String> {
    use prost::Message as _;
    let mut methods = Vec::new();
    for set in SERVED_DESCRIPTOR_SETS {
        let set = prost_types::FileDescriptorSet::decode(set).expect("a descriptor set built into the binary decodes");
        for file in &set.file {
            for service in &file.service {
                for method in &service.method {
                    methods.push(format!("/{}.{}/{}", file.package(), service.name(), method.name()));
                }
            }
        }
    }
    methods
}

/// Builds the routes: WorkQueueService, CacheService (over `informers`;
/// empty in the standalone mode, where every informer is NOT_FOUND),
/// ObjectService (over `writer`; `None` in the standalone mode, where every
/// write is FAILED_PRECONDITION), grpc.health.v1, and server reflection v1
/// and v1alpha (so `grpcurl list` and `describe` work). `shut_down` says
/// whether clients may stop a queue.
pub async fn api(
    queues: Arc<QueueRegistry>,
    informers: Arc<InformerRegistry>,
    writes: Option<Writes>,
    shut_down: ShutDownRpc,
) -> Result<Api, tonic_reflection::server::Error> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<WorkQueueServiceServer<WorkQueueApi>>().await;
    health.set_serving::<CacheServiceServer<CacheApi>>().await;
    health.set_serving::<ObjectServiceServer<ObjectApi>>().await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let finalizers = writes.as_ref().map(|w| {
        let declared = w.finalizers.iter().map(|(queue, name)| (queue.as_str(), name.as_str()));
        Arc::new(DeclaredFinalizers::new(declared, &informers, w.writer.clone(), w.freshness.clone()))
    });
    let api = WorkQueueApi::new(queues, shut_down).with_informers(informers.clone()).with_finalizers(finalizers);
    let workqueue = WorkQueueServiceServer::new(api)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let freshness = writes.as_ref().map(|w| w.freshness.clone());
    let cache = CacheServiceServer::new(CacheApi::new(informers, freshness))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let objects = ObjectServiceServer::new(ObjectApi::new(writes))
        .max_decoding_message_size(MAX_WRITE_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let routes = Routes::new(workqueue)
        .add_service(cache)
        .add_service(objects)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    Ok(Api { routes, health, methods: served_methods() })
}

/// Marks the queue and cache services as not serving, for the start of a
/// shutdown. The server as a whole (the empty service name) stays SERVING
/// while the process runs: it is what a liveness probe asks, and a drain
/// must not get the sidecar killed before its grace period ends.
pub async fn set_not_serving(health: &HealthReporter) {
    health.set_not_serving::<WorkQueueServiceServer<WorkQueueApi>>().await;
    health.set_not_serving::<CacheServiceServer<CacheApi>>().await;
    health.set_not_serving::<ObjectServiceServer<ObjectApi>>().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_methods_should_name_every_service_the_routes_serve() {
        let methods = served_methods();
        for path in [
            "/workqueue.v1.WorkQueueService/Get",
            "/workqueue.v1.ObjectService/ApplyObject",
            "/workqueue.v1.CacheService/ListObjects",
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        ] {
            assert!(methods.iter().any(|m| m == path), "{path} missing from {methods:?}");
        }
    }
}
