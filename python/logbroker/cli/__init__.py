"""The `logbroker` command (main.py: `serve`, `config-keys` and the dispatch to each
subcommand's module) and its subcommands, one module each: topic, group, cluster (with
voter: add-voter, remove-voter), produce_consume (produce and consume), mirror, archive,
bench, user, acl, quota; args.py holds what they share. The top layer: nothing else in
logbroker imports it."""
