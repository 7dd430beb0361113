//! Calendars: named exclusions jobs name in `exclude`, held in one hash on the meta tag, and
//! the set of jobs that name each one.

use std::collections::HashMap;

use redis::{AsyncCommands, Value};

use super::*;
use crate::error::{Error, Result};
use crate::job::{Calendar, CalendarSpec};

script!(DELETE, "calendar_delete.lua");

impl Store {
    /// Create or replace a calendar (validated by the caller) and tell every node: they drop
    /// their copy, and the next instant of each job that names it is judged by the new one
    /// when it comes.
    pub async fn put_calendar(&self, spec: &CalendarSpec) -> Result<()> {
        let json = serde_json::to_string(spec).map_err(|e| Error::Corrupt(e.to_string()))?;
        let mut conn = self.conn.clone();
        let _: i64 = conn.hset(self.keys().calendars(), &spec.name, json).await?;
        self.announce_calendar(&spec.name).await
    }

    async fn announce_calendar(&self, name: &str) -> Result<()> {
        let msg = serde_json::json!({"op": "calendars", "id": name}).to_string();
        let _: i64 = self
            .conn
            .clone()
            .spublish(self.keys().changes(), msg)
            .await?;
        Ok(())
    }

    /// One calendar, if it exists.
    pub async fn calendar(&self, name: &str) -> Result<Option<CalendarSpec>> {
        let raw: Option<String> = self
            .conn
            .clone()
            .hget(self.keys().calendars(), name)
            .await?;
        raw.map(|r| serde_json::from_str(&r).map_err(|e| Error::Corrupt(e.to_string())))
            .transpose()
    }

    /// Every calendar, by name.
    pub async fn calendars(&self) -> Result<Vec<CalendarSpec>> {
        let all: HashMap<String, String> =
            self.conn.clone().hgetall(self.keys().calendars()).await?;
        let mut out: Vec<CalendarSpec> = all
            .into_values()
            .map(|r| serde_json::from_str(&r).map_err(|e| Error::Corrupt(e.to_string())))
            .collect::<Result<_>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Every calendar, validated (one that no longer validates is left out and logged).
    pub async fn loaded_calendars(&self) -> Result<HashMap<String, std::sync::Arc<Calendar>>> {
        let mut out = HashMap::new();
        for spec in self.calendars().await? {
            let name = spec.name.clone();
            match spec.validate() {
                Ok(c) => {
                    out.insert(name, std::sync::Arc::new(c));
                }
                Err(e) => {
                    tracing::error!(calendar = %name, error = %e, "stored calendar no longer validates")
                }
            }
        }
        Ok(out)
    }

    /// Register `job_id` as a user of each calendar of `names`, then check each exists:
    /// the first missing one, if any (the caller refuses the job). Registration comes
    /// first so that a concurrent deletion either sees the job or is seen missing here.
    pub async fn use_calendars(&self, job_id: &str, names: &[String]) -> Result<Option<usize>> {
        if names.is_empty() {
            return Ok(None);
        }
        let mut pipe = redis::pipe();
        for name in names {
            pipe.sadd(self.keys().calendar_users(name), job_id).ignore();
        }
        pipe.cmd("HMGET").arg(self.keys().calendars()).arg(names);
        let (found,): (Vec<Option<String>>,) = pipe.query_async(&mut self.conn.clone()).await?;
        Ok(found.iter().position(Option::is_none))
    }

    /// Delete a calendar unless a job names it in `exclude`: jobs registered as its users
    /// that no longer name it are dropped from the set first.
    pub async fn delete_calendar(&self, name: &str) -> Result<bool> {
        let users_key = self.keys().calendar_users(name);
        let users: Vec<String> = self.conn.clone().smembers(&users_key).await?;
        for chunk in users.chunks(500) {
            let ids: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let specs = self.job_specs(&ids).await?;
            let stale: Vec<&str> = ids
                .iter()
                .zip(specs)
                .filter(|(_, s)| {
                    s.as_ref()
                        .is_none_or(|s| !s.spec.exclude.iter().any(|e| e == name))
                })
                .map(|(id, _)| *id)
                .collect();
            if !stale.is_empty() {
                let _: i64 = self.conn.clone().srem(&users_key, &stale).await?;
            }
        }
        let reply: Value = DELETE
            .key(self.keys().calendars())
            .key(&users_key)
            .arg(name)
            .arg(self.keys().changes())
            .invoke_async(&mut self.conn.clone())
            .await?;
        match reply {
            Value::Int(1) => Ok(true),
            Value::Int(_) => Ok(false),
            Value::Array(v) => {
                let mut jobs: Vec<String> = v
                    .into_iter()
                    .filter_map(|x| redis::from_redis_value(x).ok())
                    .collect();
                jobs.sort();
                Err(Error::CalendarInUse {
                    name: name.to_string(),
                    jobs,
                })
            }
            other => Err(Error::Corrupt(format!("calendar_delete replied {other:?}"))),
        }
    }
}
