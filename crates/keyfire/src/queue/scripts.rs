//! The delay queue's Lua scripts, one file per atomic operation (`src/store/lua/q_*.lua`, beside
//! the scheduler's), each loaded once (EVALSHA; redis-rs falls back to EVAL on NOSCRIPT).
//!
//! They are registered here rather than in `store::scripts` because that module is private to
//! `store`; the files and their conventions (header naming KEYS, ARGV and the reply; every key
//! passed in KEYS, named in `store::Keys`) are the same.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(super) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../store/lua/", $file))));
    };
}

script!(Q_ADD, "q_add.lua");
script!(Q_READY, "q_ready.lua");
script!(Q_POP, "q_pop.lua");
script!(Q_REQUEUE, "q_requeue.lua");
script!(Q_FINISH, "q_finish.lua");
script!(Q_TOUCH, "q_touch.lua");
script!(Q_DELETE, "q_delete.lua");
