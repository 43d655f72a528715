"""The web console (`console.listen=HOST:PORT`): a page served by the broker that shows the
cluster, its topics and consumer groups, browses records and draws throughput, and lets an
operator create, reconfigure and delete topics and reset a group's offsets.

It is a client of the cluster like any other: every figure and every action is a Kafka
request made with logbroker's own admin client and consumer (`logbroker.client`), bootstrapped
at the broker's own listener, through the same functions as `logbroker topic`, `group` and
`cluster status` (`logbroker.admin_views`). So it is behind the same authorization as the
Kafka API: it sees and changes what its Kafka credentials may.
On a broker with a SASL listener it asks for a login (console/sessions.py: the broker's
users, sessions in cookies, a CSRF token on every change) and each user's requests are made
as that user on that listener; on one without, it has no login, as the listener has none. The
client calls block, so each runs in a worker thread (`trio.to_thread.run_sync`, at most
`THREADS` at once on the console's own limiter) and the broker's event loop never waits.

REST routes (JSON in and out; an error is `{"error": "...", "kafka_error": NAME}` with a 4xx
or 5xx status, the message naming the topic or group and the Kafka error):

    GET    /api/cluster                         cluster id, controller, brokers (host, port,
                                                rack, fenced, reachable, status), quorum,
                                                partitions offline or under-replicated
    GET    /api/topics[?internal=1]             topics: partitions, replication factor,
                                                partitions needing attention, records, bytes
    POST   /api/topics                          create: {"name", "partitions",
                                                "replication_factor", "configs": {k: v}}
    GET    /api/topics/{name}                   partitions (leader, replicas, ISR, log start
                                                and end offsets, size) and configs
    POST   /api/topics/{name}/config            alter: {"set": {k: v}, "delete": [k]}
    DELETE /api/topics/{name}                   delete
    GET    /api/topics/{name}/messages          records: ?partition=P&offset=N|timestamp=MS
                                                &limit=L&format=text|json|hex (default: the
                                                last L records)
    GET    /api/groups                          consumer groups: id, protocol type, state
    GET    /api/groups/{id}                     state, members (client id, host, assignment),
                                                committed offset, log end and lag per partition
    POST   /api/groups/{id}/reset-offsets       {"topic", "to": earliest|latest|offset|
                                                timestamp, "value"}; 409 unless the group is empty
    DELETE /api/groups/{id}                     delete an empty group
    GET    /api/throughput                      records/s and bytes/s in per topic, sampled
                                                every SAMPLE_INTERVAL_S, the last WINDOW_S
    POST   /api/login                           {"username", "password"}: the session cookie
                                                and {"user", "principal", "mechanism",
                                                "csrf_token"} (a console with logins)
    GET    /api/session                         the same for the session of the cookie
    POST   /api/logout                          forgets the session, clears the cookie

With logins, every /api/ route but /api/login answers 401 without a live session, and every
POST and DELETE 403 without the session's X-CSRF-Token (or from another Origin).

`/` is the page (static/index.html, console.js, console.css: plain JavaScript, no build step,
nothing fetched from elsewhere).
"""

from logbroker.console.server import ConsoleServer

__all__ = ["ConsoleServer"]
