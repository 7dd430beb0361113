# Follows the server's version (the workspace version in Cargo.toml); clients/generate.sh sets
# it and clients/check.sh fails when it differs.
__version__ = "0.1.0"
