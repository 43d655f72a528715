"""The control plane, in two subpackages and the peer wire they share.

`metadata/`: the metadata log and what writes it: the controller and its control managers
(`*_control.py`), the image, its records and deltas, the Raft quorum that replicates them,
forwarding to the active controller, broker registrations, sessions and elections.

`groups/`: the coordinators that keep their state in internal topics: consumer groups
(`__consumer_offsets`), share groups (`__share_group_state`) and transactions
(`__transaction_state`), with the state topics' record formats.

Here, beside them, the peer wire that both use: length-prefixed frames (framing.py), a
peer connection's TLS and SASL (peer_security.py, peer_sasl.py) and requests from this
broker to another broker's client listener (broker_channel.py). These import neither
subpackage; `groups` may import `metadata` (a coordinator asks the controller for its
internal topic), never the other way round (tests/test_layout.py)."""
