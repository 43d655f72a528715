"""The Iceberg catalog and the topics' tables, from the broker keys `iceberg.*`
(docs/configuration.md). See logbroker/iceberg for the layout.

Defaults: a SQL catalog in DATA_DIR/__iceberg/catalog.db (SQLite) named
`iceberg.catalog.name`, and the warehouse DATA_DIR/__iceberg/warehouse. The SQL catalog is
Iceberg's JDBC catalog layout (tables iceberg_tables and iceberg_namespace_properties), so
Spark's `org.apache.iceberg.jdbc.JdbcCatalog` with `uri=jdbc:sqlite:<file>` and the same
catalog name sees the same tables.

A REST catalog (`iceberg.catalog.type=rest`) places new tables itself: `iceberg.warehouse`,
when set, is sent to it as the warehouse to use, and is otherwise left to the server. The
broker writes data files where the table's location says (a directory it can reach, or S3
with the `iceberg.s3.*` keys) and commits them through the catalog.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path
from typing import Any

from logbroker.iceberg import IcebergError
from logbroker.iceberg.table_schema import KEY_COLUMNS, TABLE_PROPERTIES, column_names, partition_spec, table_schema

DEFAULT_DIR = "__iceberg"  # under the data directory; the log-directory scan skips "__" names
SETTING_KEYS = (
    "iceberg.catalog.type",
    "iceberg.catalog.uri",
    "iceberg.catalog.name",
    "iceberg.warehouse",
    "iceberg.namespace",
    "iceberg.s3.endpoint",
    "iceberg.s3.region",
    "iceberg.s3.access.key.id",
    "iceberg.s3.secret.access.key",
    "iceberg.catalog.credential",
    "iceberg.catalog.token",
    "iceberg.catalog.oauth2.server.uri",
    "iceberg.catalog.scope",
)
# a rest catalog's authentication: broker key -> pyiceberg's RestCatalog property
REST_AUTH = {
    "iceberg.catalog.credential": "credential",
    "iceberg.catalog.token": "token",
    "iceberg.catalog.oauth2.server.uri": "oauth2-server-uri",
    "iceberg.catalog.scope": "scope",
}


def require_pyiceberg() -> None:
    for module in ("pyiceberg", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            raise IcebergError(f"iceberg.enable needs {module}: pip install 'logbroker[iceberg]'")


@dataclasses.dataclass(frozen=True)
class CatalogSettings:
    catalog_type: str  # sql | rest
    uri: str
    name: str
    warehouse: str  # a directory path, a file:// URL or s3://BUCKET/PREFIX; "": the REST catalog's
    namespace: str
    s3_endpoint: str = ""
    s3_region: str = "us-east-1"
    s3_access_key_id: str = ""
    s3_secret_access_key: str = ""
    rest_auth: tuple[tuple[str, str], ...] = ()  # (pyiceberg property, value) of the keys set

    @classmethod
    def from_keys(cls, keys: dict[str, Any], data_dir: Path | None = None) -> CatalogSettings:
        """From broker keys (SETTING_KEYS); empty uri/warehouse default under `data_dir`."""
        get = lambda k, d="": str(keys.get(k) or d)  # noqa: E731
        base = (data_dir or Path(".")).resolve() / DEFAULT_DIR
        catalog_type = get("iceberg.catalog.type", "sql")
        uri = get("iceberg.catalog.uri")
        if not uri:
            if catalog_type != "sql":
                raise IcebergError("iceberg.catalog.type=rest needs iceberg.catalog.uri (the REST catalog's URL)")
            uri = f"sqlite:///{base / 'catalog.db'}"
        warehouse = get("iceberg.warehouse") or (str(base / "warehouse") if catalog_type == "sql" else "")
        return cls(
            catalog_type,
            uri,
            get("iceberg.catalog.name", "logbroker"),
            warehouse,
            get("iceberg.namespace", "logbroker"),
            get("iceberg.s3.endpoint"),
            get("iceberg.s3.region", "us-east-1"),
            get("iceberg.s3.access.key.id"),
            get("iceberg.s3.secret.access.key"),
            tuple((prop, get(key)) for key, prop in REST_AUTH.items() if get(key)),
        )

    def label(self) -> str:
        """The catalog as errors name it: name, type and address (a password in the URL left out)."""
        uri = re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", self.uri)
        return f"catalog {self.name!r} ({self.catalog_type} at {uri})"

    def warehouse_url(self) -> str:
        if "://" in self.warehouse:
            return self.warehouse
        return Path(self.warehouse).resolve().as_uri()

    def properties(self) -> dict[str, str]:
        props = {"uri": self.uri}
        if self.catalog_type == "rest":
            props.update(self.rest_auth)
            if "credential" in props and "oauth2-server-uri" not in props:
                # the REST spec's token endpoint, named (pyiceberg's implicit fallback is deprecated)
                props["oauth2-server-uri"] = f"{self.uri.rstrip('/')}/v1/oauth/tokens"
        if self.warehouse:
            props["warehouse"] = self.warehouse_url()
        # a REST catalog may place tables in S3 whatever warehouse the broker names
        if self.warehouse.startswith("s3://") or self.s3_endpoint or self.s3_access_key_id:
            props["s3.region"] = self.s3_region or "us-east-1"
            if self.s3_endpoint:
                props["s3.endpoint"] = self.s3_endpoint
                props["s3.path-style-access"] = "true"
            if self.s3_access_key_id:
                props["s3.access-key-id"] = self.s3_access_key_id
            if self.s3_secret_access_key:
                props["s3.secret-access-key"] = self.s3_secret_access_key
        return props


def table_name(topic: str) -> str:
    """The table of a topic within the namespace: '.' is written '_' (Iceberg reads a '.'
    as a namespace separator; Kafka refuses topics that collide this way)."""
    return topic.replace(".", "_")


def open_catalog(settings: CatalogSettings):
    """A pyiceberg catalog (blocking: network or database)."""
    require_pyiceberg()
    try:
        if settings.catalog_type == "sql":
            if settings.uri.startswith("sqlite:///"):
                Path(settings.uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
            if "://" not in settings.warehouse:
                Path(settings.warehouse).mkdir(parents=True, exist_ok=True)
            from pyiceberg.catalog.sql import SqlCatalog

            for attempt in range(3):
                try:
                    return SqlCatalog(settings.name, **settings.properties())
                except Exception as e:  # two processes creating the catalog's tables at once
                    if "already exists" not in str(e) or attempt == 2:
                        raise
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(settings.name, **settings.properties())
    except IcebergError:
        raise
    except Exception as e:  # pyiceberg and SQLAlchemy raise many kinds; name the catalog
        raise IcebergError(f"opening the Iceberg {settings.label()}: {type(e).__name__}: {e}") from None


def load_or_create_table(
    catalog, settings: CatalogSettings, topic: str, value_struct=None, key_struct=None, spec: str | None = None
):
    """The topic's table, created (with its namespace) when missing; a table found with
    other columns is refused (IcebergError), never written. `value_struct`: the value's
    columns of an iceberg.mode=value_schema_id_prefix table (table_schema.py); `key_struct`:
    its decoded keys' (a table found without them gets them later: TableWriter.value_table);
    `spec`: iceberg.partition.spec, the partition spec a new table gets (a found table keeps
    its own)."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

    ident = f"{settings.namespace}.{table_name(topic)}"
    try:
        try:
            table = catalog.load_table(ident)
        except NoSuchTableError:
            try:
                catalog.create_namespace(settings.namespace)
            except NamespaceAlreadyExistsError:
                pass
            schema = table_schema(value_struct, key_struct)
            try:
                spec_of_table = partition_spec(spec, schema)
            except ValueError as e:
                raise IcebergError(f"table {ident} of topic {topic}: {e}") from None
            try:
                table = catalog.create_table(
                    ident,
                    schema=schema,
                    partition_spec=spec_of_table,
                    properties={**TABLE_PROPERTIES, "logbroker.topic": topic},
                )
            except TableAlreadyExistsError:  # another node created it first
                table = catalog.load_table(ident)
    except IcebergError:
        raise
    except Exception as e:
        raise IcebergError(
            f"loading table {ident} of topic {topic} from {settings.label()}: {type(e).__name__}: {e}"
        ) from None
    want = column_names(table_schema(value_struct))
    have = [c for c in column_names(table.schema()) if c[0] not in KEY_COLUMNS]
    if have != want:
        mode = "value_schema_id_prefix" if value_struct is not None else "key_value"
        raise IcebergError(
            f"table {ident} of topic {topic} has columns {have}, not the columns of iceberg.mode="
            f"{mode} {want} (the mode is fixed when the table is created); the broker does not "
            f"write to it"
        )
    return table
