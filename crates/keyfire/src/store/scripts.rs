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

/// A script call on the firing path, built straight into its command: its keys and its
/// arguments written into two buffers (a key name or lease member from its parts, a record
/// through a scratch buffer kept for the call, none allocated on its own), then one `EVALSHA`
/// sized for them, loading the script on `NOSCRIPT` and asking again, as redis-rs's
/// `ScriptInvocation` does. That one allocates every argument on its own and copies them all
/// into its command again: about a twentieth of a node's instructions per firing, and the
/// names built per firing as strings were as much again.
pub(crate) struct ScriptCall<'s> {
    script: &'s redis::Script,
    keys: redis::Cmd,
    args: redis::Cmd,
    scratch: Vec<u8>,
}

/// Write `parts` into `cmd` as one argument.
fn write_parts(cmd: &mut redis::Cmd, parts: &[&str]) {
    use redis::RedisWrite;
    use std::io::Write;
    let mut w = cmd.writer_for_next_arg();
    for p in parts {
        // infallible: the writer appends to the command's buffer.
        let _ = w.write_all(p.as_bytes());
    }
}

impl<'s> ScriptCall<'s> {
    /// A call of `script` with room for `items` of `keys` keys and `args` arguments of about
    /// `bytes` bytes in all each (a batch of firings): its buffers grown one by one were
    /// copied over again at every doubling.
    pub(crate) fn sized(
        script: &'s redis::Script,
        items: usize,
        keys: usize,
        args: usize,
        bytes: usize,
    ) -> Self {
        Self {
            script,
            keys: redis::Cmd::with_capacity(8 + items * keys, 256 + items * keys * 64),
            args: redis::Cmd::with_capacity(8 + items * args, 256 + items * bytes),
            scratch: Vec::new(),
        }
    }

    /// Add a key (`KEYS[n]`).
    pub(crate) fn key(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.keys.arg(key.as_ref());
        self
    }

    /// Add a key (`KEYS[n]`) given as its parts, such as [`Keys::parts`](super::keys::Keys::parts).
    pub(crate) fn key_of(&mut self, parts: &[&str]) -> &mut Self {
        write_parts(&mut self.keys, parts);
        self
    }

    /// Add an argument (`ARGV[n]`).
    pub(crate) fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.args.arg(arg);
        self
    }

    /// Add an argument (`ARGV[n]`) given as its parts.
    pub(crate) fn arg_of(&mut self, parts: &[&str]) -> &mut Self {
        write_parts(&mut self.args, parts);
        self
    }

    /// Add an argument (`ARGV[n]`) that `build` writes (into a buffer kept for the call).
    pub(crate) fn arg_built<E>(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<&mut Self, E> {
        self.scratch.clear();
        build(&mut self.scratch)?;
        self.args.arg(&self.scratch[..]);
        Ok(self)
    }

    /// Run it: `EVALSHA`, and on `NOSCRIPT` load the script and run it again.
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> redis::RedisResult<T> {
        let parts = || self.keys.args_iter().chain(self.args.args_iter());
        let bytes: usize = parts()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.len(),
                _ => 0,
            })
            .sum();
        let nkeys = self.keys.args_iter().len();
        let mut cmd =
            redis::Cmd::with_capacity(2 + nkeys + self.args.args_iter().len(), 64 + bytes);
        cmd.arg("EVALSHA").arg(self.script.get_hash()).arg(nkeys);
        for a in parts() {
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
