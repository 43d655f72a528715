"""The metadata side of the control plane: the controller (controller.py), the single writer
of the metadata log, and its control managers (`*_control.py`, pure: image and request in,
records out; control.py); the image (metadata.py), its records (metadata_records.py) and
deltas (metadata_delta.py); the Raft quorum that replicates the log (quorum.py,
quorum_transport.py, metadata_quorum.py); the controller listener's requests
(controller_channel.py) and forwarding to the active controller (controller_forwarding.py);
broker registrations, heartbeats and sessions (broker_lifecycle.py, broker_sessions.py);
leader elections, reassignments and the reconcile pass (elections.py, reassignment.py,
reconcile_scope.py). It never imports `logbroker.coord.groups`."""
