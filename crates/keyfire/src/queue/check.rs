//! Input checks: each error names the bad field, and nothing is written.

use std::time::Duration;

use super::{
    DEFAULT_MAX_DELIVERIES, DEFAULT_TTR, MAX_DELAY, MAX_DELIVERIES_LIMIT, MAX_NEW_ID_LEN, MAX_POP,
    MAX_PRIORITY, MAX_TASK_ID_LEN, MAX_TOPIC_LEN, MAX_TTR, MAX_WAIT, NewTask, When, duration_ms,
};
use crate::error::{Error, Result};
use crate::job::{Dedup, OnDuplicate, ValidationError};

/// A task that passed its checks, in the form the add script takes.
pub(super) struct Checked {
    pub(super) id: String,
    pub(super) topic: String,
    pub(super) payload: String,
    pub(super) ttr_ms: i64,
    pub(super) max_deliveries: u32,
    /// `delay` or `at`, and the delay or instant in ms.
    pub(super) when: (&'static str, i64),
    /// 0 to [`MAX_PRIORITY`].
    pub(super) priority: u8,
    /// The checked dedup declaration and what a duplicate does.
    pub(super) dedup: Option<(Dedup, OnDuplicate)>,
}

/// The seven arguments of one task in `add.lua` besides its traceparent (a default ttr, max
/// deliveries or priority is not stored).
pub(super) fn add_args(t: &Checked) -> [String; 7] {
    let max = if t.max_deliveries == DEFAULT_MAX_DELIVERIES {
        String::new()
    } else {
        t.max_deliveries.to_string()
    };
    let ttr = if t.ttr_ms == duration_ms(DEFAULT_TTR) {
        String::new()
    } else {
        t.ttr_ms.to_string()
    };
    [
        t.id.clone(),
        t.payload.clone(),
        ttr,
        max,
        t.when.0.to_string(),
        t.when.1.to_string(),
        if t.priority == 0 {
            String::new()
        } else {
            t.priority.to_string()
        },
    ]
}

/// Check a priority: 0 to [`MAX_PRIORITY`], naming `priority`.
pub fn check_priority(priority: u8) -> Result<()> {
    if priority > MAX_PRIORITY {
        return Err(invalid(
            "priority",
            format!("must be 0 to {MAX_PRIORITY} (higher is popped first), not {priority}"),
        ));
    }
    Ok(())
}

/// How many tasks one pop may take: 1 to [`MAX_POP`].
pub fn check_max(max: usize) -> Result<()> {
    if max == 0 || max > MAX_POP {
        return Err(invalid("max", format!("must be 1 to {MAX_POP}, not {max}")));
    }
    Ok(())
}

/// How long one pop may wait: at most [`MAX_WAIT`].
pub fn check_wait(wait: Duration) -> Result<()> {
    if wait > MAX_WAIT {
        return Err(invalid(
            "wait",
            format!("must be at most {}", humantime::format_duration(MAX_WAIT)),
        ));
    }
    Ok(())
}

/// The topic a reservation token names (`<32 hex digits>.<topic>`), or an error naming
/// `field`: a token no pop could have given.
pub fn token_topic<'a>(field: &str, token: &'a str) -> Result<&'a str> {
    let topic = token
        .split_at_checked(32)
        .filter(|(hex, _)| hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|(_, rest)| rest.strip_prefix('.'))
        .filter(|topic| check_topic(topic).is_ok());
    topic.ok_or_else(|| invalid(field, "not a reservation token (as a pop returns it)"))
}

pub(super) fn check(task: &NewTask, max_payload_bytes: usize) -> Result<Checked> {
    check_topic(&task.topic)?;
    let id = match &task.id {
        Some(_) if task.dedup.is_some() => {
            return Err(invalid(
                "id",
                "leave the id out when dedup is given: keyfire picks it, and the dedup key is \
                 what makes a retried add safe",
            ));
        }
        Some(id) => {
            check_name("id", id, MAX_NEW_ID_LEN)?;
            id.clone()
        }
        None => uuid::Uuid::new_v4().simple().to_string(),
    };
    check_priority(task.priority)?;
    let dedup = match &task.dedup {
        Some(d) => {
            let on = d.on_duplicate().map_err(Error::Invalid)?;
            let resolved = d
                .resolve(&format!("topic:{}", task.topic), &task.payload)
                .map_err(Error::Invalid)?;
            Some((resolved, on))
        }
        None => None,
    };
    check_ttr(task.ttr)?;
    check_max_deliveries(task.max_deliveries)?;
    let payload = serde_json::to_string(&task.payload)?;
    check_payload(&payload, max_payload_bytes)?;
    let when = match task.when {
        When::Delay(d) if d > MAX_DELAY => {
            return Err(invalid("delay", "too long (at most 100 years)"));
        }
        When::Delay(d) => ("delay", duration_ms(d)),
        When::At(at) => ("at", at.timestamp_millis()),
    };
    Ok(Checked {
        id,
        topic: task.topic.clone(),
        payload,
        ttr_ms: duration_ms(task.ttr),
        max_deliveries: task.max_deliveries,
        when,
        priority: task.priority,
        dedup,
    })
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::Invalid(ValidationError::new(field, message))
}

/// Letters, digits, `_`, `.`, `-`, starting with a letter or digit, at most `max` bytes: the
/// rule of job ids, so names never hold the `:` that separates key name parts.
fn check_name(field: &str, name: &str, max: usize) -> Result<()> {
    if name.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if name.len() > max {
        return Err(invalid(field, format!("must be at most {max} bytes")));
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if !name.chars().all(ok) || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(invalid(
            field,
            "may hold only letters, digits, '_', '.' and '-', and must start with a letter or digit",
        ));
    }
    Ok(())
}

/// Check a topic name (errors name the field `topic`).
pub fn check_topic(topic: &str) -> Result<()> {
    check_name("topic", topic, MAX_TOPIC_LEN)
}

/// Check a task id (errors name the field `id`).
pub fn check_task_id(id: &str) -> Result<()> {
    check_name("id", id, MAX_TASK_ID_LEN)
}

pub(super) fn check_ttr(ttr: Duration) -> Result<()> {
    if ttr.as_millis() == 0 {
        return Err(invalid("ttr", "must be at least 1ms"));
    }
    if ttr > MAX_TTR {
        return Err(invalid(
            "ttr",
            "must be at most 24h (touch extends a reservation)",
        ));
    }
    Ok(())
}

pub(super) fn check_max_deliveries(n: u32) -> Result<()> {
    if n == 0 || n > MAX_DELIVERIES_LIMIT {
        return Err(invalid(
            "max_deliveries",
            format!("must be between 1 and {MAX_DELIVERIES_LIMIT}"),
        ));
    }
    Ok(())
}

pub(super) fn check_payload(json: &str, max: usize) -> Result<()> {
    if json.len() > max {
        return Err(invalid(
            "payload",
            format!("too large: {} bytes, the limit is {max}", json.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field(e: Error) -> String {
        match e {
            Error::Invalid(v) => v.field,
            other => panic!("not a validation error: {other}"),
        }
    }

    #[test]
    fn bad_input_names_the_field() {
        let ok = NewTask::new("orders", json!({"n": 1}));
        assert!(check(&ok, 1024).is_ok());
        assert_eq!(
            field(
                check(
                    &NewTask {
                        topic: "a:b".into(),
                        ..ok.clone()
                    },
                    1024
                )
                .err()
                .unwrap()
            ),
            "topic"
        );
        assert_eq!(
            field(
                check(
                    &NewTask {
                        topic: String::new(),
                        ..ok.clone()
                    },
                    1024
                )
                .err()
                .unwrap()
            ),
            "topic"
        );
        assert_eq!(
            field(
                check(
                    &NewTask {
                        topic: "x".repeat(129),
                        ..ok.clone()
                    },
                    1024
                )
                .err()
                .unwrap()
            ),
            "topic"
        );
        assert!(
            check(
                &NewTask {
                    topic: "x".repeat(128),
                    ..ok.clone()
                },
                1024
            )
            .is_ok()
        );
        assert_eq!(
            field(check(&ok.clone().ttr(Duration::ZERO), 1024).err().unwrap()),
            "ttr"
        );
        assert_eq!(
            field(
                check(&ok.clone().ttr(Duration::from_micros(10)), 1024)
                    .err()
                    .unwrap()
            ),
            "ttr"
        );
        assert_eq!(
            field(check(&ok.clone().ttr(MAX_TTR * 2), 1024).err().unwrap()),
            "ttr"
        );
        assert_eq!(
            field(check(&ok.clone().max_deliveries(0), 1024).err().unwrap()),
            "max_deliveries"
        );
        assert_eq!(
            field(check(&ok.clone().id("bad id"), 1024).err().unwrap()),
            "id"
        );
        assert_eq!(
            field(check(&ok.clone().id("x".repeat(127)), 1024).err().unwrap()),
            "id"
        );
        assert!(check(&ok.clone().id("x".repeat(126)), 1024).is_ok());
        assert_eq!(field(check(&ok.clone(), 5).err().unwrap()), "payload");
        assert_eq!(
            field(check(&ok.clone().delay(MAX_DELAY * 2), 1024).err().unwrap()),
            "delay"
        );
    }

    #[test]
    fn generated_ids_fit_a_job_id() {
        let t = check(&NewTask::new("t", json!(null)), 1024).unwrap();
        assert_eq!(t.id.len(), 32);
        assert!(super::super::job_id(&t.id).len() <= 128);
    }
}
