//! `script!`: a Lua script of `lua/` (beside the module that names it), one file per atomic
//! operation, loaded once (EVALSHA; redis-rs falls back to EVAL and caches on NOSCRIPT).
//! `script!(NAME, "lib.lua" + "file.lua")` prepends a library of functions that several scripts
//! share (Redis has no includes). A visibility may come first (`script!(pub(super) NAME, …)`).
//! The one macro for every script of the crate: the store's and the delay queue's
//! (`crate::store::script!`).

macro_rules! script {
    ($vis:vis $name:ident, $file:literal) => {
        $vis static $name: std::sync::LazyLock<redis::Script> =
            std::sync::LazyLock::new(|| redis::Script::new(include_str!(concat!("lua/", $file))));
    };
    ($vis:vis $name:ident, $lib:literal + $file:literal) => {
        $vis static $name: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
            redis::Script::new(concat!(
                include_str!(concat!("lua/", $lib)),
                include_str!(concat!("lua/", $file))
            ))
        });
    };
}

pub(crate) use script;
