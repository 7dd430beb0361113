//! The Lua scripts, one file per atomic operation, each loaded once (EVALSHA; redis-rs
//! falls back to EVAL and caches on NOSCRIPT).

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("lua/", $file))));
    };
}

script!(UPSERT, "upsert.lua");
script!(INSERT, "insert.lua");
script!(DELETE, "delete.lua");
script!(PAUSE, "pause.lua");
script!(CLAIM, "claim.lua");
script!(PROMOTE, "promote.lua");
script!(CLAIM_RETRY, "claim_retry.lua");
script!(RECOVER, "recover.lua");
script!(TRIGGER, "trigger.lua");
script!(DEAD, "dead.lua");
script!(COMPLETE, "complete.lua");
script!(RENEW, "renew.lua");
script!(HEARTBEAT, "heartbeat.lua");
