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

/// A script call on the firing path, built straight into its `EVALSHA` command: its keys
/// (declared up front, all written before the first argument) and its arguments written
/// into the command's one buffer (a key name or lease member from its parts, a record
/// through a scratch buffer kept for the call, none allocated on its own), sized for its
/// batch, loading the script on `NOSCRIPT` and asking again, as redis-rs's
/// `ScriptInvocation` does. That one allocates every argument on its own and copies them all
/// into its command again; keys and arguments built apart and copied into the command were
/// a tenth of a node's instructions per firing again.
pub(crate) struct ScriptCall<'s> {
    script: &'s redis::Script,
    cmd: redis::Cmd,
    /// Keys declared, and written so far.
    nkeys: usize,
    keys: usize,
    scratch: Vec<u8>,
}

/// Write `parts` into `cmd` as one argument, gathered in `scratch` (kept for the call) and
/// written at once: written part by part through the command's `io::Write`, each part cost
/// as much again as its copy.
fn write_parts(cmd: &mut redis::Cmd, scratch: &mut Vec<u8>, parts: &[&str]) {
    use redis::RedisWrite;
    scratch.clear();
    for p in parts {
        scratch.extend_from_slice(p.as_bytes());
    }
    cmd.write_arg(scratch);
}

impl<'s> ScriptCall<'s> {
    /// A call of `script` with `nkeys` keys in all, and room for `items` items of `args`
    /// arguments of about `bytes` bytes in all each (a batch of firings): a buffer grown
    /// one by one was copied over again at every doubling.
    pub(crate) fn sized(
        script: &'s redis::Script,
        nkeys: usize,
        items: usize,
        args: usize,
        bytes: usize,
    ) -> Self {
        let mut cmd = redis::Cmd::with_capacity(
            3 + nkeys + 8 + items * args,
            256 + nkeys * 64 + items * bytes,
        );
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(nkeys);
        Self {
            script,
            cmd,
            nkeys,
            keys: 0,
            scratch: Vec::new(),
        }
    }

    /// Count a key about to be written (debug builds check it was declared).
    fn next_key(&mut self) {
        debug_assert!(self.keys < self.nkeys, "more keys than declared");
        self.keys += 1;
    }

    /// Debug builds check that every key was written before an argument is.
    fn after_keys(&self) {
        debug_assert_eq!(self.keys, self.nkeys, "an argument before every key");
    }

    /// Add a key (`KEYS[n]`).
    pub(crate) fn key(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.next_key();
        self.cmd.arg(key.as_ref());
        self
    }

    /// Add a key (`KEYS[n]`) given as its parts, such as [`Keys::parts`](super::keys::Keys::parts).
    pub(crate) fn key_of(&mut self, parts: &[&str]) -> &mut Self {
        self.next_key();
        write_parts(&mut self.cmd, &mut self.scratch, parts);
        self
    }

    /// Add an argument (`ARGV[n]`), after every key.
    pub(crate) fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.after_keys();
        self.cmd.arg(arg);
        self
    }

    /// Add an argument (`ARGV[n]`) given as its parts.
    pub(crate) fn arg_of(&mut self, parts: &[&str]) -> &mut Self {
        self.after_keys();
        write_parts(&mut self.cmd, &mut self.scratch, parts);
        self
    }

    /// Add an argument (`ARGV[n]`) that `build` writes (into a buffer kept for the call).
    pub(crate) fn arg_built<E>(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<&mut Self, E> {
        self.after_keys();
        self.scratch.clear();
        build(&mut self.scratch)?;
        self.cmd.arg(&self.scratch[..]);
        Ok(self)
    }

    /// Run it: `EVALSHA`, and on `NOSCRIPT` load the script and run it again. Refused (sent
    /// nowhere) if its keys are not those declared.
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> redis::RedisResult<T> {
        self.check()?;
        match self.cmd.query_async(con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.script.load_async(con).await?;
                self.cmd.query_async(con).await
            }
            other => other,
        }
    }

    /// Refused unless the keys written are those declared (the count sent with `EVALSHA`).
    fn check(&self) -> redis::RedisResult<()> {
        if self.keys == self.nkeys {
            return Ok(());
        }
        Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "script call built wrong",
            format!("{} keys declared, {} written", self.nkeys, self.keys),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::ScriptCall;

    /// A call whose keys are fewer than declared is refused before it is sent; one with
    /// every key declared written is not.
    #[test]
    fn a_call_with_fewer_keys_than_declared_is_refused() {
        let script = redis::Script::new("return 1");
        let mut short = ScriptCall::sized(&script, 2, 1, 0, 0);
        short.key("a");
        let err = short.check().expect_err("one key of two");
        assert!(
            err.to_string().contains("2 keys declared, 1 written"),
            "{err}"
        );
        let mut whole = ScriptCall::sized(&script, 2, 1, 1, 8);
        whole.key("a").key_of(&["b", ":", "c"]).arg("x");
        assert!(whole.check().is_ok());
    }

    /// Parts make one argument, short or long, whatever the scratch buffer held before.
    #[test]
    fn parts_make_one_argument_short_or_long() {
        let long = "x".repeat(300);
        let cases: [&[&str]; 4] = [
            &["a:", "{b}", ":c"],
            &["k:", &long, ":z"],
            &[&long[..256]],
            &[],
        ];
        let mut scratch = Vec::new();
        for parts in cases {
            let mut cmd = redis::Cmd::new();
            super::write_parts(&mut cmd, &mut scratch, parts);
            let args: Vec<Vec<u8>> = cmd
                .args_iter()
                .map(|a| match a {
                    redis::Arg::Simple(b) => b.to_vec(),
                    _ => Vec::new(),
                })
                .collect();
            assert_eq!(args, vec![parts.concat().into_bytes()]);
        }
    }
}
