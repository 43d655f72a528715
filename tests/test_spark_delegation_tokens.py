"""The Spark data source and sink on a SASL broker with delegationToken=true: the driver logs
in as the user and creates a delegation token; the executors read and write with the token
alone (what Spark ships to them holds no password), acting as the token's owner under the
ACLs (spark/security.py)."""

from __future__ import annotations

import pickle

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

import logbroker
from logbroker.client.connection import BrokerConnection
from logbroker.common.acl import STANDARD_AUTHORIZER
from logbroker.protocol import REQUESTS

PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret";'
)


def test_spark_reads_and_writes_with_a_delegation_token(tmp_path, spark):
    config = {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "delegation.token.secret.key": "spark-secret",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin",
    }
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        bs = b.bootstrap_servers
        admin_conf = {
            "bootstrap.servers": bs,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
        admin = AdminClient(admin_conf)
        for f in admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
                )
            ]
        ).values():
            f.result(30)
        for f in admin.create_topics([NewTopic("events", 2, 1), NewTopic("copied", 1, 1)]).values():
            f.result(30)
        acls = [
            AclBinding(
                ResourceType.TOPIC,
                t,
                ResourcePatternType.LITERAL,
                "User:alice",
                "*",
                AclOperation.ALL,
                AclPermissionType.ALLOW,
            )
            for t in ("events", "copied")
        ]
        for f in admin.create_acls(acls).values():
            f.result(30)
        with logbroker.Producer(bs, **{k: v for k, v in admin_conf.items() if k != "bootstrap.servers"}) as p:
            for i in range(40):
                p.send("events", b"e-%d" % i, partition=i % 2)
            p.flush(30)

        alice = {
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.username": "alice",
            "kafka.sasl.password": "alice-secret",
        }
        df = (
            spark.read.format("logbroker")
            .option("bootstrap.servers", bs)
            .option("subscribe", "events")
            .options(**alice)
            .option("delegationToken", "true")
            .load()
        )
        assert sorted(r.value for r in df.select("value").collect()) == sorted(b"e-%d" % i for i in range(40))

        # what the executors get holds the token, not alice's password
        from logbroker.spark.source import LogbrokerBatchReader, Options

        opts = Options(
            {"bootstrap.servers": bs, "subscribe": "events", "delegationToken": "true", **alice}, streaming=False
        )
        shipped = pickle.dumps(LogbrokerBatchReader(opts, None))
        assert b"alice-secret" not in shipped and b"tokenauth" in shipped and opts.token.token_id.encode() in shipped
        assert opts.client["sasl.mechanism"] == "SCRAM-SHA-512"

        (
            df.select("value")
            .write.format("logbroker")
            .option("bootstrap.servers", bs)
            .option("topic", "copied")
            .options(**alice)
            .option("delegationToken", "true")
            .mode("append")
            .save()
        )
        back = (
            spark.read.format("logbroker")
            .option("bootstrap.servers", bs)
            .option("subscribe", "copied")
            .options(**alice)
            .load()
        )
        assert sorted(r.value for r in back.select("value").collect()) == sorted(b"e-%d" % i for i in range(40))

        # the tokens are alice's, made on the driver
        with BrokerConnection(
            bs,
            config={
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-secret",
            },
        ) as c:
            tokens = c._roundtrip(41, 3, REQUESTS[41](owners=None)).tokens
        assert len(tokens) >= 3 and {t.principal_name for t in tokens} == {"alice"}
