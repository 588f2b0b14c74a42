//! Caravan's api-gateway service.
