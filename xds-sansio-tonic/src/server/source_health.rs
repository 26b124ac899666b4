//! The health of a replica's source of truth, beside its own: a service name of the gRPC
//! health service that says whether the replica is fed (feature `etcd`,
//! [`crate::etcd::EtcdSource`]).

use super::XdsServer;

impl XdsServer {
    /// Sets the health service's status of `service` (a name of its own, such as
    /// [`crate::etcd::HEALTH_SERVICE`]): `SERVING` when `fed` and shutdown has not begun,
    /// else `NOT_SERVING`. `""` and the discovery services are left as they are: a replica
    /// that lost its source still serves its last state.
    pub async fn report_source_health(&self, service: &str, fed: bool) {
        let status = if fed && !*self.shared.shutdown.borrow() {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        self.shared.health.set_service_status(service, status).await;
    }
}
