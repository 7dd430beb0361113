//! `script!`: a Lua script of `lua/` (beside the module that names it), one file per atomic
//! operation, loaded once (EVALSHA; redis-rs falls back to EVAL and caches on NOSCRIPT).
//! `script!(NAME, "lib.lua" + "file.lua")` prepends a library (or two: `"a.lua" + "b.lua" + "file.lua"`) of functions that several scripts
//! share (Redis has no includes). A visibility may come first (`script!(pub(super) NAME, …)`).
//! The one macro for every script of the crate: the store's and the delay queue's
//! (`crate::store::script!`).
//!
//! A script's first line may be a shebang with Redis's script flags (`#!lua flags=allow-oom`:
//! it runs at `maxmemory`); Redis reads it only there, so with a library the file's shebang
//! goes first, before the library.

macro_rules! script {
    ($vis:vis $name:ident, $file:literal) => {
        $vis static $name: std::sync::LazyLock<redis::Script> =
            std::sync::LazyLock::new(|| redis::Script::new(include_str!(concat!("lua/", $file))));
    };
    ($vis:vis $name:ident, $lib:literal + $file:literal) => {
        $vis static $name: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
            let lib = include_str!(concat!("lua/", $lib));
            let file = include_str!(concat!("lua/", $file));
            // The file's shebang line (with its newline), then the library, then the rest.
            let shebang = if file.starts_with("#!") {
                file.find('\n').map_or(file.len(), |end| end + 1)
            } else {
                0
            };
            let (first, rest) = file.split_at(shebang);
            redis::Script::new(&[first, lib, rest].concat())
        });
    };
    ($vis:vis $name:ident, $lib:literal + $lib2:literal + $file:literal) => {
        $vis static $name: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
            let lib = include_str!(concat!("lua/", $lib));
            let lib2 = include_str!(concat!("lua/", $lib2));
            let file = include_str!(concat!("lua/", $file));
            let shebang = if file.starts_with("#!") {
                file.find('\n').map_or(file.len(), |end| end + 1)
            } else {
                0
            };
            let (first, rest) = file.split_at(shebang);
            redis::Script::new(&[first, lib, lib2, rest].concat())
        });
    };
}

pub(crate) use script;
