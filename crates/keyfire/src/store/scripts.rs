//! `script!`: a Lua script of `lua/`, one file per atomic operation, loaded once (EVALSHA; redis-rs
//! falls back to EVAL and caches on NOSCRIPT).

macro_rules! script {
    ($name:ident, $file:literal) => {
        static $name: std::sync::LazyLock<redis::Script> =
            std::sync::LazyLock::new(|| redis::Script::new(include_str!(concat!("lua/", $file))));
    };
}
