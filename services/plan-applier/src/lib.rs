//! Caravan's plan-applier service.
