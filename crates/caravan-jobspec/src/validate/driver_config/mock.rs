//! The `mock` driver's config: the options of Caravan's mock driver
//! (`run_for`, `exit_code`, …); Nomad's mock options it does not have are
//! refused with the reason.

use super::schema::{Schema, Ty, no, opt};

const NOT_MOCKED: &str = "Caravan's mock driver does not simulate it";

/// The mock driver's schema.
pub const SCHEMA: Schema = Schema {
    driver: "mock",
    fields: &[
        opt("run_for", Ty::Duration),
        opt("exit_code", Ty::Num),
        opt("exit_signal", Ty::Num),
        opt("start_error", Ty::Str),
        opt("start_error_recoverable", Ty::Bool),
        opt("kill_after", Ty::Duration),
        opt("stdout_string", Ty::Str),
        no("start_block_for", NOT_MOCKED),
        no("exit_err_msg", NOT_MOCKED),
        no("signal_error", NOT_MOCKED),
        no("driver_ip", NOT_MOCKED),
        no("driver_advertise", NOT_MOCKED),
        no("driver_port_map", NOT_MOCKED),
        no("stdout_repeat", NOT_MOCKED),
        no("stdout_repeat_duration", NOT_MOCKED),
        no("exec_command", NOT_MOCKED),
    ],
};
