//! Typed replies of the delay queue's scripts, decoded with checks on their shape.

use redis::{FromRedisValue, ParsingError, Value};

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

/// Decode the `{1, value} | {0, state} | {-1, 'missing'}` reply of touch.
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

/// One task's answer in the reply of `add.lua`.
pub(super) struct Added {
    pub(super) added: bool,
    pub(super) state: String,
}

/// The reply of `add.lua`: per task, whether it was added and its state.
pub(super) struct AddReply(pub(super) Vec<Added>);

impl FromRedisValue for AddReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let items: Vec<Value> = Vec::from_redis_value_ref(&v)?;
        if items.is_empty() || !(items.len() - 1).is_multiple_of(3) {
            return Err(parse_err("add", &v));
        }
        items[1..]
            .chunks(3)
            .map(|c| {
                Ok(Added {
                    added: i64::from_redis_value_ref(&c[0])? == 1,
                    state: String::from_redis_value_ref(&c[1])?,
                })
            })
            .collect::<std::result::Result<_, ParsingError>>()
            .map(AddReply)
    }
}

/// One task a pop reserved, as `pop.lua` answers it.
pub(super) struct Taken {
    pub(super) id: String,
    pub(super) payload: String,
    pub(super) deliveries: u32,
    pub(super) ttr_ms: i64,
    pub(super) due_ms: i64,
    pub(super) ready_ms: i64,
    pub(super) deadline_ms: i64,
    pub(super) token: String,
    /// The add's `traceparent` ('' when none was stored).
    pub(super) traceparent: String,
    pub(super) priority: u8,
}

/// The reply of `pop.lua`.
pub(super) struct PopReply {
    pub(super) now_ms: i64,
    /// Ready tasks left after this pop.
    pub(super) left: u64,
    pub(super) earliest_deadline: Option<i64>,
    /// The lane is paused: nothing was taken, whatever is ready.
    pub(super) paused: bool,
    pub(super) taken: Vec<Taken>,
}

impl FromRedisValue for PopReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let items: Vec<Value> = Vec::from_redis_value_ref(&v)?;
        let err = || parse_err("pop", &v);
        let num = |i: usize| -> std::result::Result<i64, ParsingError> {
            items
                .get(i)
                .map(i64::from_redis_value_ref)
                .ok_or_else(err)?
        };
        let n = usize::try_from(num(0)?).map_err(|_| err())?;
        if items.len() != 5 + 10 * n {
            return Err(err());
        }
        let taken = items[5..]
            .chunks(10)
            .map(|c| {
                Ok(Taken {
                    id: String::from_redis_value_ref(&c[0])?,
                    payload: String::from_redis_value_ref(&c[1])?,
                    deliveries: u32::from_redis_value_ref(&c[2])?,
                    ttr_ms: i64::from_redis_value_ref(&c[3])?,
                    due_ms: i64::from_redis_value_ref(&c[4])?,
                    ready_ms: i64::from_redis_value_ref(&c[5])?,
                    deadline_ms: i64::from_redis_value_ref(&c[6])?,
                    token: String::from_redis_value_ref(&c[7])?,
                    traceparent: String::from_redis_value_ref(&c[8])?,
                    priority: u8::from_redis_value_ref(&c[9])?,
                })
            })
            .collect::<std::result::Result<_, ParsingError>>()?;
        Ok(PopReply {
            now_ms: num(1)?,
            left: num(2)?.max(0) as u64,
            earliest_deadline: Some(num(3)?).filter(|d| *d >= 0),
            paused: num(4)? == 1,
            taken,
        })
    }
}

/// The reply of `promote.lua`.
#[derive(Debug, Clone, Copy)]
pub(super) struct PromoteReply {
    pub(super) moved: u64,
    pub(super) now_ms: i64,
    pub(super) next_due: Option<i64>,
    pub(super) more: bool,
}

impl FromRedisValue for PromoteReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let (moved, now_ms, next, more): (u64, i64, i64, i64) =
            FromRedisValue::from_redis_value_ref(&v).map_err(|_| parse_err("promote", &v))?;
        Ok(Self {
            moved,
            now_ms,
            next_due: Some(next).filter(|n| *n >= 0),
            more: more == 1,
        })
    }
}

/// The reply of `finish.lua`: per task, 1 done, 0 refused, -1 missing, -2 deleted.
pub(super) struct FinishReply(pub(super) Vec<i64>);

impl FromRedisValue for FinishReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let items: Vec<i64> = Vec::from_redis_value_ref(&v)?;
        if items.is_empty() {
            return Err(parse_err("finish", &v));
        }
        Ok(FinishReply(items[1..].to_vec()))
    }
}

/// The reply of `requeue.lua`.
pub(super) struct RequeueReply {
    pub(super) requeued: u64,
    pub(super) dead: u64,
}

impl FromRedisValue for RequeueReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let items: Vec<Value> = Vec::from_redis_value_ref(&v)?;
        if items.len() < 3 {
            return Err(parse_err("requeue", &v));
        }
        Ok(Self {
            requeued: u64::from_redis_value_ref(&items[0])?,
            dead: u64::from_redis_value_ref(&items[1])?,
        })
    }
}
