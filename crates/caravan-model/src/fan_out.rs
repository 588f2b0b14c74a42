//! The ids of the evaluations a node change owes through a fan-out (see
//! `NodeFanOut`): derived from the fan-out's id and the job, so every writer
//! that creates one of them, on every try, names it the same and a second
//! creation finds it there.

use uuid::Uuid;

/// The name space of fan-out eval ids (a fixed, random UUID).
const FAN_OUT_IDS: Uuid = Uuid::from_u128(0x6c1f_2d0e_93a4_4b57_8e61_0f3c_7a9d_5b22);

/// The id of fan-out `fan_out_id`'s eval for a job.
pub fn fan_out_eval_id(fan_out_id: &str, namespace: &str, job_id: &str) -> String {
    let name = format!("{fan_out_id}\n{namespace}\n{job_id}");
    Uuid::new_v5(&FAN_OUT_IDS, name.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_per_fan_out_and_job_and_differ_otherwise() {
        let a = fan_out_eval_id("f1", "default", "web");
        assert_eq!(a, fan_out_eval_id("f1", "default", "web"));
        assert_ne!(a, fan_out_eval_id("f2", "default", "web"));
        assert_ne!(a, fan_out_eval_id("f1", "other", "web"));
        assert_ne!(a, fan_out_eval_id("f1", "default", "db"));
        assert!(Uuid::parse_str(&a).is_ok(), "{a}");
    }
}
