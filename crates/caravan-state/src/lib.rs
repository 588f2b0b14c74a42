//! Caravan's typed watch cache of cluster state.
