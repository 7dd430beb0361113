//! `script!`: a Lua script of `lua/`, one file per atomic operation, loaded once (EVALSHA; redis-rs
//! falls back to EVAL and caches on NOSCRIPT). `script!(NAME, "lib.lua" + "file.lua")` prepends
//! a library of functions that several scripts share (Redis has no includes).

macro_rules! script {
    ($name:ident, $file:literal) => {
        static $name: std::sync::LazyLock<redis::Script> =
            std::sync::LazyLock::new(|| redis::Script::new(include_str!(concat!("lua/", $file))));
    };
    ($name:ident, $lib:literal + $file:literal) => {
        static $name: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
            redis::Script::new(concat!(
                include_str!(concat!("lua/", $lib)),
                include_str!(concat!("lua/", $file))
            ))
        });
    };
}
