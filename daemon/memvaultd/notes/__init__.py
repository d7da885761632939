"""Watched note folders: Markdown files kept in step with the vault.

`chunking.py` cuts a file into sections, `note_folder.py` plans what a scan
or an edit changes, `watcher.py` follows the folders and writes the plan
through the vault's public methods. It may import the vault, config and
model rooms; the vault knows nothing of files.
"""
