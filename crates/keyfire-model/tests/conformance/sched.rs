//! The scheduler's scripts against [`keyfire_model::sched`]. Firing `f` is a one-shot job
//! `j<f>` (a job hash, as `upsert.lua` writes one) due at tick `f + 1`; node `n` is `n<n>`.

use keyfire_model::sched::{self, Call, Data, Firing, Lease, MAX_ATTEMPTS, Outcome, Sched};
use keyfire_model::walk::{self, Rng};
use redis::Value;
use stateright::Model;

use super::{ms, scripts, set_clock, tick};

const P: &str = "{m}";
const CHANNEL: &str = "{m}:changes";

fn key(what: &str) -> String {
    format!("{P}:{what}")
}
fn job(f: u8) -> String {
    format!("j{f}")
}
fn node(n: u8) -> String {
    format!("n{n}")
}
fn fid(m: &Sched, f: u8) -> String {
    format!("j{f}:{}", ms(m.at(f)))
}

/// The scripts a walk runs.
pub(crate) struct Scripts {
    claim: redis::Script,
    claim_retry: redis::Script,
    renew: redis::Script,
    heartbeat: redis::Script,
    complete: redis::Script,
    recover: redis::Script,
}

impl Scripts {
    /// The real ones.
    pub(crate) fn real() -> Self {
        Self::with_complete(scripts::COMPLETE)
    }

    /// The real ones but `complete.lua`.
    pub(crate) fn with_complete(complete: &str) -> Self {
        Scripts {
            claim: scripts::load(Some(scripts::LEDGER_LIB), scripts::CLAIM),
            claim_retry: scripts::load(Some(scripts::LEDGER_LIB), scripts::CLAIM_RETRY),
            renew: scripts::load(None, scripts::RENEW),
            heartbeat: scripts::load(None, scripts::HEARTBEAT),
            complete: scripts::load(Some(scripts::FANIN_LIB), complete),
            recover: scripts::load(Some(scripts::FANIN_LIB), scripts::RECOVER),
        }
    }
}

/// One walk: `steps` steps from the model's start, chosen by `seed`. Err: where Redis and the
/// model parted, with the walk so far.
pub(crate) fn walk(
    con: &mut redis::Connection,
    scripts: &Scripts,
    seed: u64,
    steps: usize,
    seen: &mut super::Coverage,
) -> Result<(), String> {
    let model = Sched::new(2);
    let mut state = start(con, &model)?;
    let mut rng = Rng::new(seed);
    let mut trail = String::new();
    for i in 0..steps {
        if model.next_states(&state).is_empty() {
            // Nothing left to do: a new episode from the start.
            trail = format!("(from the start, at step {i})\n");
            state = start(con, &model)?;
        }
        let Some((step, _)) = walk::next(&model, &state, &mut rng, |_| true) else {
            break;
        };
        let mut calls = Vec::new();
        model.apply(&mut state, step, &mut calls);
        trail.push_str(&format!("{i:>4}. {step}\n"));
        if step == sched::Step::Tick {
            set_clock(con, state.now);
        }
        for call in calls {
            seen.count(kind(call));
            run(con, scripts, &model, call).map_err(|e| format!("{e}\nafter:\n{trail}"))?;
        }
        let seen = read(con, &model).map_err(|e| format!("{e}\nafter:\n{trail}"))?;
        if seen != state.data {
            return Err(format!(
                "Redis's data is not the model's\n redis: {seen:?}\n model: {:?}\nafter:\n{trail}",
                state.data
            ));
        }
    }
    Ok(())
}

/// Redis with the model's firings pending at tick 0, and the model's start.
fn start(con: &mut redis::Connection, model: &Sched) -> Result<sched::State, String> {
    redis::cmd("FLUSHALL")
        .query::<()>(con)
        .map_err(|e| e.to_string())?;
    set_clock(con, 0);
    for f in 0..model.firings {
        let at = ms(model.at(f));
        redis::pipe()
            .cmd("HSET")
            .arg(key(&format!("job:{}", job(f))))
            .arg(&[
                ("spec", "{}".to_string()),
                ("version", "1".into()),
                ("gen", "1".into()),
                ("status", "active".into()),
                ("next", at.to_string()),
                ("once", "1".into()),
            ])
            .cmd("ZADD")
            .arg(key("due"))
            .arg(at)
            .arg(job(f))
            .cmd("ZADD")
            .arg(key("jobs"))
            .arg(0)
            .arg(job(f))
            .query::<()>(con)
            .map_err(|e| e.to_string())?;
    }
    Ok(model.init_states().remove(0))
}

/// What a call exercises, for the coverage the tests ask of the walks.
fn kind(call: Call) -> &'static str {
    match call {
        Call::Heartbeat { lapsed: true, .. } => "heartbeat.lua finds an entry lapsed",
        Call::Heartbeat { .. } => "heartbeat.lua",
        Call::Claim { claimed: true, .. } => "claim.lua claims",
        Call::Claim { .. } => "claim.lua refuses",
        Call::ClaimRetry {
            attempt: Some(_), ..
        } => "claim_retry.lua claims",
        Call::ClaimRetry { .. } => "claim_retry.lua refuses",
        Call::Renew { ours: true, .. } => "renew.lua renews",
        Call::Renew { .. } => "renew.lua refuses",
        Call::Complete {
            recorded: false, ..
        } => "complete.lua refuses a fenced outcome",
        Call::Complete { ok: true, .. } => "complete.lua records ok",
        Call::Complete { .. } => "complete.lua records a failure",
        Call::Recover { taken: false, .. } => "recover.lua refuses",
        Call::Recover { holder: None, .. } => "recover.lua takes an expired lease",
        Call::Recover { .. } => "recover.lua takes a named holder's run",
    }
}

/// Run a script call as the library makes it; compare its reply with the model's.
fn run(con: &mut redis::Connection, s: &Scripts, m: &Sched, call: Call) -> Result<(), String> {
    let lease_ms = (i64::from(sched::LEASE) * super::TICK).to_string();
    let ttl_ms = (i64::from(sched::TTL) * super::TICK).to_string();
    let err = |e: redis::RedisError| format!("{call:?}: {e}");
    let expect = |ok: bool, reply: &dyn std::fmt::Debug| {
        if ok {
            Ok(())
        } else {
            Err(format!("{call:?}: the script answered {reply:?}"))
        }
    };
    match call {
        Call::Heartbeat { node: n, lapsed } => {
            let reply: Vec<Value> = s
                .heartbeat
                .key(key("nodes"))
                .key(key(&format!("node:{}", node(n))))
                .key(key("data"))
                .arg(node(n))
                .arg(&ttl_ms)
                .arg("{}")
                .arg("0")
                .arg(CHANNEL)
                .arg("marker")
                .invoke(con)
                .map_err(err)?;
            let got = matches!(reply.get(1), Some(Value::Int(1)));
            expect(got == lapsed, &reply)
        }
        Call::Claim {
            node: n,
            firing: f,
            claimed,
        } => {
            // One text for the call: "1 <now>" for a claimed firing (see claim.lua).
            let reply: String = s
                .claim
                .key(key("due"))
                .key(key("running"))
                .key(key("jobs"))
                .key(key("tasks:count"))
                .key(key(&format!("job:{}", job(f))))
                .arg(node(n))
                .arg(&lease_ms)
                .arg(CHANNEL)
                .arg(60_000)
                .arg(3_000)
                .arg(0)
                .arg(job(f))
                .arg(ms(m.at(f)))
                .arg("1.1")
                .arg("")
                .arg(100_000_000)
                .invoke(con)
                .map_err(err)?;
            let got = reply.split(' ').next() == Some("1");
            expect(got == claimed, &reply)
        }
        Call::ClaimRetry {
            node: n,
            firing: f,
            attempt,
        } => {
            let reply: Vec<Value> = s
                .claim_retry
                .key(key(&format!("job:{}", job(f))))
                .key(key("retry"))
                .key(key("running"))
                .key(key("attempts"))
                .key(key(&format!("skips:{}", job(f))))
                .arg(fid(m, f))
                .arg(node(n))
                .arg(&lease_ms)
                .arg("allow")
                .arg(CHANNEL)
                .arg(job(f))
                .arg("")
                .arg("100|86400000")
                .invoke(con)
                .map_err(err)?;
            let got = match reply.as_slice() {
                [Value::Int(1), _, Value::Int(a)] => Some(*a as u8),
                _ => None,
            };
            expect(got == attempt, &reply)
        }
        Call::Renew {
            node: n,
            firing: f,
            attempt,
            claimed,
            ours,
        } => {
            let reply: i64 = s
                .renew
                .key(key("running"))
                .key(key("attempts"))
                .key(key(&format!("job:{}", job(f))))
                .arg(node(n))
                .arg(fid(m, f))
                .arg(&lease_ms)
                .arg(attempt)
                .arg(ms(claimed))
                .invoke(con)
                .map_err(err)?;
            expect((reply == 1) == ours, &reply)
        }
        Call::Complete {
            node: n,
            firing: f,
            attempt,
            claimed,
            ok,
            recorded,
        } => {
            let member = format!("{}|{attempt}|{}|{}", fid(m, f), ms(claimed), node(n));
            let record = format!(
                r#"{{"firing_id":"{}","attempt":{attempt},"node":"{}","outcome":"{}""#,
                fid(m, f),
                node(n),
                if ok { "ok" } else { "failed" }
            );
            let mut inv = s.complete.prepare_invoke();
            inv.key(key("running"))
                .key(key("attempts"))
                .key(key("retry"))
                .key(key("done"))
                .key(key("outbox"))
                .key(key("outbox:data"))
                .key(key("cancels"))
                .key(key("due"))
                .key(key(&format!("job:{}", job(f))))
                .key(key(&format!("runs:{}", job(f))))
                .arg(100)
                .arg(100)
                .arg(86_400_000)
                .arg(key("changes"))
                .arg(&member)
                .arg(job(f))
                .arg(&record);
            if ok {
                inv.arg("1");
            } else if attempt < MAX_ATTEMPTS {
                inv.arg("sfailed|1|0|00");
            } else {
                inv.arg("sfailed|1||10")
                    .key(key(&format!("dead:{}", job(f))))
                    .arg(format!(r#"{{"firing_id":"{}"}}"#, fid(m, f)));
            }
            // One text for the call: Redis time, then the attempt's fate (see complete.lua).
            let reply: String = inv.invoke(con).map_err(err)?;
            let fate = reply.split(' ').nth(1).unwrap_or_default().to_string();
            expect((fate != "fenced") == recorded, &reply)
        }
        Call::Recover {
            node: _,
            firing: f,
            holder,
            taken,
        } => {
            let reply: Vec<i64> = s
                .recover
                .key(key("running"))
                .key(key("attempts"))
                .key(key("retry"))
                .key(key(&format!("job:{}", job(f))))
                .key(key(&format!("dead:{}", job(f))))
                .key(key(&format!("lock:{}", fid(m, f))))
                .key(key(&format!("runs:{}", job(f))))
                .key(key("cancels"))
                .arg(fid(m, f))
                .arg(MAX_ATTEMPTS)
                .arg(100)
                .arg("{}")
                .arg(100)
                .arg(ms(m.at(f)))
                .arg(holder.map(node).unwrap_or_default())
                .arg("lost")
                .arg("")
                .invoke(con)
                .map_err(err)?;
            expect((reply.first() != Some(&0)) == taken, &reply)
        }
    }
}

/// Redis's data in the model's terms.
fn read(con: &mut redis::Connection, m: &Sched) -> Result<Data, String> {
    let e = |e: redis::RedisError| e.to_string();
    let running: Vec<(String, i64)> = redis::cmd("ZRANGE")
        .arg(key("running"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)
        .map_err(e)?;
    let mut firings = Vec::new();
    for f in 0..m.firings {
        let jk = key(&format!("job:{}", job(f)));
        let (next, dead): (Option<String>, Option<i64>) = redis::cmd("HMGET")
            .arg(&jk)
            .arg("next")
            .arg("dead")
            .query(con)
            .map_err(e)?;
        let due_score: Option<i64> = redis::cmd("ZSCORE")
            .arg(key("due"))
            .arg(job(f))
            .query(con)
            .map_err(e)?;
        let at = ms(m.at(f));
        let due = match (due_score, next.as_deref()) {
            (Some(s), Some(n)) if s == at && n == at.to_string() => true,
            (None, Some("")) => false,
            other => {
                return Err(format!(
                    "firing {f}: due entry and `next` disagree: {other:?}"
                ));
            }
        };
        let prefix = format!("{}|", fid(m, f));
        let mut leases = Vec::new();
        for (member, score) in &running {
            if let Some(rest) = member.strip_prefix(&prefix) {
                let parts: Vec<&str> = rest.splitn(3, '|').collect();
                let [a, c, n] = parts[..] else {
                    return Err(format!("lease {member}"));
                };
                leases.push(Lease {
                    attempt: a.parse().map_err(|_| format!("lease {member}"))?,
                    claimed: tick(c.parse().map_err(|_| format!("lease {member}"))?)?,
                    node: n
                        .trim_start_matches('n')
                        .parse()
                        .map_err(|_| format!("lease {member}"))?,
                    expiry: tick(*score)?,
                });
            }
        }
        if leases.len() > 1 {
            return Err(format!("firing {f} holds {} leases", leases.len()));
        }
        let retry_at: Option<i64> = redis::cmd("ZSCORE")
            .arg(key("retry"))
            .arg(fid(m, f))
            .query(con)
            .map_err(e)?;
        let attempt: Option<u8> = redis::cmd("HGET")
            .arg(key("attempts"))
            .arg(fid(m, f))
            .query(con)
            .map_err(e)?;
        let retry = match (retry_at, attempt) {
            (None, None) => None,
            (Some(_), Some(a)) => Some(a),
            other => {
                return Err(format!(
                    "firing {f}: retry entry and attempt disagree: {other:?}"
                ));
            }
        };
        let runs: Vec<String> = redis::cmd("LRANGE")
            .arg(key(&format!("runs:{}", job(f))))
            .arg(0)
            .arg(-1)
            .query(con)
            .map_err(e)?;
        let mut records = Vec::new();
        for r in runs.iter().rev() {
            let attempt = field(r, "attempt").ok_or(format!("record {r}"))?;
            let outcome = match field(r, "outcome").as_deref() {
                Some("\"ok\"") => Outcome::Ok,
                Some("\"failed\"") => Outcome::Failed,
                Some("\"lost\"") => Outcome::Lost,
                _ => return Err(format!("record {r}")),
            };
            records.push((attempt.parse().map_err(|_| format!("record {r}"))?, outcome));
        }
        firings.push(Firing {
            due,
            lease: leases.pop(),
            retry,
            records,
            dead: dead.unwrap_or(0) > 0,
        });
    }
    let mut seen = Vec::new();
    for n in 0..m.nodes {
        let score: Option<i64> = redis::cmd("ZSCORE")
            .arg(key("nodes"))
            .arg(node(n))
            .query(con)
            .map_err(e)?;
        seen.push(score.map(tick).transpose()?);
    }
    Ok(Data { firings, seen })
}

/// A field's value in a flat JSON object, as text.
fn field(json: &str, name: &str) -> Option<String> {
    let at = json.find(&format!("\"{name}\":"))? + name.len() + 3;
    let rest = &json[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}
