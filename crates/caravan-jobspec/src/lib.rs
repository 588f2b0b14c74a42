//! Job files (HCL and Nomad JSON) to Caravan's job model, with defaults, validation and diffs.
