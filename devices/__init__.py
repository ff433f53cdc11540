"""Device profiles (TOML), shipped as package data."""
