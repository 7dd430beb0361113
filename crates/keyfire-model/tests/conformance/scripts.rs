//! The real Lua scripts, as the library loads them (a library prepended after the file's
//! shebang line, as the `script!` macro does), with one change: Redis's `TIME` reads the walk's
//! clock (the key `kfm:clock`, in ms), so that a walk decides what time it is. Nothing else of
//! a script is touched; a mutant is a copy with one rule weakened.

/// Redis's `TIME`, as the scripts call it.
const TIME: &str = "redis.call('TIME')";
/// What it reads instead: the walk's clock, as `TIME` answers (seconds, microseconds).
const CLOCK: &str = "(function() local c = tonumber(redis.call('GET', 'kfm:clock')); \
    return {string.format('%d', math.floor(c / 1000)), string.format('%d', (c % 1000) * 1000)} end)()";

/// The store's scripts.
pub(crate) const LEDGER_LIB: &str = include_str!("../../../keyfire/src/store/lua/ledger_lib.lua");
/// The fan-in library `complete.lua`, `recover.lua` and the queue's `finish.lua` and
/// `requeue.lua` are loaded with.
pub(crate) const FANIN_LIB: &str = include_str!("../../../keyfire/src/store/lua/fanin_lib.lua");
/// The number-formatting library the queue's `add.lua` and `pop.lua` are loaded with.
pub(crate) const TEXT_LIB: &str = include_str!("../../../keyfire/src/queue/lua/text_lib.lua");
/// `claim.lua`.
pub(crate) const CLAIM: &str = include_str!("../../../keyfire/src/store/lua/claim.lua");
/// `claim_retry.lua`.
pub(crate) const CLAIM_RETRY: &str = include_str!("../../../keyfire/src/store/lua/claim_retry.lua");
/// `renew.lua`.
pub(crate) const RENEW: &str = include_str!("../../../keyfire/src/store/lua/renew.lua");
/// `heartbeat.lua`.
pub(crate) const HEARTBEAT: &str = include_str!("../../../keyfire/src/store/lua/heartbeat.lua");
/// `complete.lua`.
pub(crate) const COMPLETE: &str = include_str!("../../../keyfire/src/store/lua/complete.lua");
/// `recover.lua`.
pub(crate) const RECOVER: &str = include_str!("../../../keyfire/src/store/lua/recover.lua");
/// The queue's scripts.
pub(crate) const ADD: &str = include_str!("../../../keyfire/src/queue/lua/add.lua");
/// `promote.lua`.
pub(crate) const PROMOTE: &str = include_str!("../../../keyfire/src/queue/lua/promote.lua");
/// `pop.lua`.
pub(crate) const POP: &str = include_str!("../../../keyfire/src/queue/lua/pop.lua");
/// `touch.lua`.
pub(crate) const TOUCH: &str = include_str!("../../../keyfire/src/queue/lua/touch.lua");
/// `finish.lua`.
pub(crate) const FINISH: &str = include_str!("../../../keyfire/src/queue/lua/finish.lua");
/// `requeue.lua`.
pub(crate) const REQUEUE: &str = include_str!("../../../keyfire/src/queue/lua/requeue.lua");

/// A script as the library loads it, `lib` (if any) after the file's shebang line, with the
/// walk's clock for `TIME`.
pub(crate) fn load(lib: Option<&str>, file: &str) -> redis::Script {
    assert!(file.contains(TIME), "the script reads Redis's TIME");
    let file = file.replace(TIME, CLOCK);
    let text = match lib {
        None => file,
        Some(lib) => {
            let shebang = if file.starts_with("#!") {
                file.find('\n').map_or(file.len(), |end| end + 1)
            } else {
                0
            };
            let (first, rest) = file.split_at(shebang);
            [first, lib, rest].concat()
        }
    };
    redis::Script::new(&text)
}

/// `text` with `from` replaced by `to`, exactly once (a mutant; it fails loudly when the
/// script no longer holds the line it weakens).
pub(crate) fn mutate(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "the mutant's line is no longer in the script: {from:?}"
    );
    text.replace(from, to)
}
