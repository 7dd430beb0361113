//! Typed replies of the delay queue's scripts, decoded with checks on their shape.

use redis::{FromRedisValue, ParsingError, Value};

use super::TaskState;
use crate::error::{Error, Result};

fn parse_err(what: &str, v: &Value) -> ParsingError {
    ParsingError::from(format!("unexpected {what} reply: {v:?}"))
}

pub(super) fn text(v: &Value) -> Result<String> {
    Ok(String::from_redis_value_ref(v).map_err(redis::RedisError::from)?)
}

pub(super) fn code(reply: &[Value]) -> Result<i64> {
    match reply.first() {
        Some(v) => Ok(i64::from_redis_value_ref(v).map_err(redis::RedisError::from)?),
        None => Err(Error::Corrupt("empty script reply".into())),
    }
}

/// Decode the `{1, value} | {0, state} | {-1, 'missing'}` reply of finish and touch.
pub(super) fn fenced(id: &str, reply: &[Value]) -> Result<i64> {
    match code(reply)? {
        1 => match reply.get(1) {
            Some(v) => Ok(i64::from_redis_value_ref(v).map_err(redis::RedisError::from)?),
            None => Err(Error::Corrupt(format!("reply {reply:?}"))),
        },
        0 => {
            let state = reply.get(1).map(text).transpose()?.unwrap_or_default();
            if state == "deleted" {
                Err(Error::TaskNotFound(id.to_string()))
            } else {
                Err(Error::ReservationLost(id.to_string()))
            }
        }
        _ => Err(Error::TaskNotFound(id.to_string())),
    }
}

/// The reply of `q_add.lua`.
pub(super) struct AddReply {
    pub(super) added: bool,
    pub(super) state: TaskState,
    pub(super) due_ms: i64,
}

impl FromRedisValue for AddReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let (added, state, due_ms, _now): (i64, String, i64, i64) =
            FromRedisValue::from_redis_value_ref(&v).map_err(|_| parse_err("q_add", &v))?;
        Ok(Self {
            added: added == 1,
            state: TaskState::parse(&state).map_err(|_| parse_err("q_add", &v))?,
            due_ms,
        })
    }
}

/// The reply of `q_pop.lua`.
pub(super) enum PopReply {
    Reserved {
        id: String,
        payload: String,
        deliveries: u32,
        ttr_ms: i64,
        due_ms: i64,
        ready_ms: i64,
        now_ms: i64,
        deadline_ms: i64,
        earliest_deadline: Option<i64>,
        next: Vec<String>,
    },
    Empty {
        ready: u64,
        earliest_deadline: Option<i64>,
        now_ms: i64,
    },
}

impl FromRedisValue for PopReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let items: Vec<Value> = Vec::from_redis_value_ref(&v)?;
        let err = || parse_err("q_pop", &v);
        let num = |i: usize| -> std::result::Result<i64, ParsingError> {
            items
                .get(i)
                .map(i64::from_redis_value_ref)
                .ok_or_else(err)?
        };
        match num(0)? {
            1 if items.len() >= 10 => Ok(PopReply::Reserved {
                id: String::from_redis_value_ref(&items[1])?,
                payload: String::from_redis_value_ref(&items[2])?,
                deliveries: u32::try_from(num(3)?).map_err(|_| err())?,
                ttr_ms: num(4)?,
                due_ms: num(5)?,
                ready_ms: num(6)?,
                now_ms: num(7)?,
                deadline_ms: num(8)?,
                earliest_deadline: Some(num(9)?).filter(|d| *d >= 0),
                next: items[10..]
                    .iter()
                    .map(String::from_redis_value_ref)
                    .collect::<std::result::Result<_, _>>()?,
            }),
            0 if items.len() == 4 => Ok(PopReply::Empty {
                ready: num(1)?.max(0) as u64,
                earliest_deadline: Some(num(2)?).filter(|d| *d >= 0),
                now_ms: num(3)?,
            }),
            _ => Err(err()),
        }
    }
}

/// The reply of `q_requeue.lua`.
pub(super) struct RequeueReply {
    pub(super) requeued: u64,
    pub(super) dead: u64,
    /// The ids made ready.
    pub(super) ids: Vec<String>,
}

impl FromRedisValue for RequeueReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let items: Vec<Value> = Vec::from_redis_value_ref(&v)?;
        if items.len() < 3 {
            return Err(parse_err("q_requeue", &v));
        }
        Ok(Self {
            requeued: u64::from_redis_value_ref(&items[0])?,
            dead: u64::from_redis_value_ref(&items[1])?,
            ids: items[3..]
                .iter()
                .map(String::from_redis_value_ref)
                .collect::<std::result::Result<_, _>>()?,
        })
    }
}
