"""Settings: `config.toml` read into one typed `Config`, every field with a default.

It gathers the settings each room declares (fusion, half-lives, heat, sweep,
consolidation, the model) and may import those rooms; the vault and the
composition root read it.
"""
