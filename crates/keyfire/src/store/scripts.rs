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

/// A script call on the firing path, built straight into its command: its keys (owned
/// strings, moved in) and its arguments (written into one buffer, not allocated one by one),
/// then one `EVALSHA`, loading the script on `NOSCRIPT` and asking again, as redis-rs's
/// `ScriptInvocation` does. That one allocates every argument on its own and copies them all
/// into its command again: about a twentieth of a node's instructions per firing.
pub(crate) struct ScriptCall<'s> {
    script: &'s redis::Script,
    keys: Vec<String>,
    args: redis::Cmd,
}

impl<'s> ScriptCall<'s> {
    /// A call of `script` with no keys or arguments yet.
    pub(crate) fn new(script: &'s redis::Script) -> Self {
        Self {
            script,
            keys: Vec::new(),
            args: redis::Cmd::new(),
        }
    }

    /// Add a key (`KEYS[n]`).
    pub(crate) fn key(&mut self, key: String) -> &mut Self {
        self.keys.push(key);
        self
    }

    /// Add an argument (`ARGV[n]`).
    pub(crate) fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.args.arg(arg);
        self
    }

    /// Run it: `EVALSHA`, and on `NOSCRIPT` load the script and run it again.
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> redis::RedisResult<T> {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.get_hash()).arg(self.keys.len());
        for k in &self.keys {
            cmd.arg(k.as_bytes());
        }
        for a in self.args.args_iter() {
            if let redis::Arg::Simple(bytes) = a {
                cmd.arg(bytes);
            }
        }
        match cmd.query_async(con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.script.load_async(con).await?;
                cmd.query_async(con).await
            }
            other => other,
        }
    }
}
