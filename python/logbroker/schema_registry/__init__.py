"""A schema registry served by the broker, compatible with Confluent Schema Registry's REST
API (`schema.registry.listen`; docs/schema-registry.md):

    records.py        the `_schemas` topic's records (Confluent's JSON format)
    state.py          the registry state those records build, the same on every node
    kafka_store.py    reading and writing `_schemas` through the broker's own listener
    compatibility.py  the compatibility levels
    schema_types.py   the schema types served, one module each (avro_type.py, json_type.py,
                      protobuf_type.py with proto_text.py)
    errors.py         InvalidSchema
    rest.py           the REST routes and Confluent's error codes
    server.py         what the broker runs
"""
