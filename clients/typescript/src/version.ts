/** Follows the server's version (the workspace version in Cargo.toml); clients/generate.sh sets it. */
export const VERSION = "0.1.0";
