"""What the control plane (`logbroker.coord`) and the broker (`logbroker.broker`) both use,
below both of them: configuration keys and their checks (config.py), storage errors as Kafka
error codes (errors.py), Kafka's ACL vocabulary (acl.py) and the SASL server side (sasl.py,
sasl_scram.py: the exchange, the mechanisms, SCRAM credentials). It imports neither coord
nor broker, so those two point one way: common <- coord <- broker (tests/test_layout.py)."""
