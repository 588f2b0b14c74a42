//! [`service_config!`](crate::service_config): the standard keys every
//! service's configuration has, implemented once.

/// Implements [`ServiceConfig`](crate::service::ServiceConfig) for a
/// configuration struct with the standard keys `grpc_addr`,
/// `advertise_addr`, `metrics_addr`, `[telemetry]` and `[tls]`; with `, store` also
/// [`StoreSection`](crate::service::StoreSection) for its `[store]`. Items
/// after `;` (`LIST_KEYS`, `validate`, …) go into the `ServiceConfig` impl.
///
/// ```ignore
/// caravan_runtime::service_config!(EvalBrokerConfig, store);
/// caravan_runtime::service_config!(SchedulerWorkerConfig, store;
///     const LIST_KEYS: &'static [&'static str] = &["schedulers"];
/// );
/// ```
#[macro_export]
macro_rules! service_config {
    ($config:ty, store $(; $($item:tt)*)?) => {
        $crate::service_config!($config $(; $($item)*)?);
        impl $crate::service::StoreSection for $config {
            fn store(&self) -> &$crate::store::StoreConfig {
                &self.store
            }
        }
    };
    ($config:ty $(; $($item:tt)*)?) => {
        impl $crate::service::ServiceConfig for $config {
            $($($item)*)?

            fn telemetry(&self) -> &$crate::telemetry::TelemetryConfig {
                &self.telemetry
            }

            fn tls(&self) -> &$crate::tls::TlsConfig {
                &self.tls
            }

            fn grpc_addr(&self) -> &str {
                &self.grpc_addr
            }

            fn advertise_addr(&self) -> &str {
                &self.advertise_addr
            }

            fn metrics_addr(&self) -> &str {
                &self.metrics_addr
            }
        }
    };
}
