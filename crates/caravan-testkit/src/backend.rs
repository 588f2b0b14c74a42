//! The two stores every service test runs on, and [`backend_cases!`], which
//! instantiates a list of backend-neutral cases once per store.
//!
//! [`backend_cases!`]: crate::backend_cases

use std::sync::Arc;

use caravan_store::{EtcdStore, MemStore, Store};

/// A store backend a case runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The embedded store.
    Mem,
    /// The etcd named by `CARAVAN_TEST_ETCD`.
    Etcd,
}

impl Backend {
    /// A fresh client of this backend: a new embedded store, or a new
    /// connection to the test etcd.
    ///
    /// # Panics
    ///
    /// Panics when the test etcd is not configured or cannot be reached.
    pub async fn store(self) -> Arc<dyn Store> {
        match self {
            Self::Mem => Arc::new(MemStore::new()),
            Self::Etcd => etcd().await,
        }
    }
}

/// A new connection to the test etcd.
///
/// # Panics
///
/// Panics when `CARAVAN_TEST_ETCD` is unset or the etcd cannot be reached.
pub async fn etcd() -> Arc<dyn Store> {
    let endpoints = crate::etcd_endpoints();
    match EtcdStore::connect(&endpoints).await {
        Ok(store) => Arc::new(store),
        Err(err) => panic!("cannot reach the test etcd at {endpoints:?}: {err}"),
    }
}

/// Instantiates backend-neutral cases as tests, once on the embedded store
/// (module `mem`) and once on etcd (module `etcd`), so the two lists cannot
/// drift apart. Each case is an async fn taking what the first word names:
///
/// - `store`: a fresh `Arc<dyn Store>`;
/// - `store_and_prefix`: a fresh store and a key prefix no other test uses,
///   named after the case;
/// - `backend`: the [`Backend`], for cases that start a service on it.
///
/// Cases are named by a path from `crate`, then either grouped by module:
///
/// ```ignore
/// caravan_testkit::backend_cases!(store => crate::cases {
///     delivery { restores_evals, ack_cancels_older },
///     gc { force_gc_takes_terminal_objects },
/// });
/// ```
///
/// or listed flat: `backend_cases!(store_and_prefix => crate; case_a, case_b);`.
/// Every test runs on tokio's multi-threaded runtime with two workers.
#[macro_export]
macro_rules! backend_cases {
    ($input:ident => $($seg:ident)::+ { $($module:ident { $($case:ident),* $(,)? }),* $(,)? }) => {
        $crate::backend_cases!(@backend mem Mem $input; $($seg)::+; $($module { $($case),* })*);
        $crate::backend_cases!(@backend etcd Etcd $input; $($seg)::+; $($module { $($case),* })*);
    };
    ($input:ident => $($seg:ident)::+; $($case:ident),* $(,)?) => {
        $crate::backend_cases!(@flat mem Mem $input; $($seg)::+; $($case),*);
        $crate::backend_cases!(@flat etcd Etcd $input; $($seg)::+; $($case),*);
    };
    (@backend $name:ident $variant:ident $input:ident; $($seg:ident)::+; $($module:ident { $($case:ident),* })*) => {
        mod $name {
            use $($seg)::+ as cases_root;
            $(
                mod $module {
                    $(
                        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                        async fn $case() {
                            $crate::backend_cases!(@call $input $variant $case; super::cases_root::$module::$case);
                        }
                    )*
                }
            )*
        }
    };
    (@flat $name:ident $variant:ident $input:ident; $($seg:ident)::+; $($case:ident),*) => {
        mod $name {
            use $($seg)::+ as cases_root;
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::backend_cases!(@call $input $variant $case; cases_root::$case);
                }
            )*
        }
    };
    (@call store $variant:ident $case:ident; $($f:ident)::+) => {
        $($f)::+($crate::Backend::$variant.store().await).await
    };
    (@call store_and_prefix $variant:ident $case:ident; $($f:ident)::+) => {
        $($f)::+(
            $crate::Backend::$variant.store().await,
            $crate::unique_prefix(stringify!($case)),
        )
        .await
    };
    (@call backend $variant:ident $case:ident; $($f:ident)::+) => {
        $($f)::+($crate::Backend::$variant).await
    };
}
