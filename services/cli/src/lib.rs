//! Caravan's command line: Nomad's verbs over the api-gateway's gRPC API, and `caravan dev`.
