"""The coordinators of the control plane, each keeping its state in a compacted internal
topic on the partition leaders: the group coordinator (group_coordinator.py; classic groups
in group.py, KIP-848 groups in consumer_group.py with assignors.py; `__consumer_offsets` in
offsets_topic.py), share groups (share_group.py, share_coordinator.py;
`__share_group_state` in share_state_log.py) and transactions (transaction_coordinator.py,
transaction_markers.py; `__transaction_state` in transaction_log.py), on the placement and
loading of state topics (state_topic.py) and the field codecs of their records
(record_fields.py). They follow the metadata image and ask the controller for their topics
(`logbroker.coord.metadata`); the metadata side never imports them."""
