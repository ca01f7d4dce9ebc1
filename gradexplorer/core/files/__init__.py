"""Files written and read safely: atomic writes, bounded JSON, a folder lock, where a command may
write."""
