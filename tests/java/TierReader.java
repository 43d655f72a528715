// A KafkaConsumer printing every record it reads, losslessly, for tests/test_iceberg_tier.py,
// run as a single-file source program (java -cp <kafka tools classpath> TierReader.java ...).
//
//   TierReader <bootstrap> <topic> <read_committed|read_uncommitted> <read> [<read> ...]
//
// Each <read> is PARTITIONS:OFFSET:LIMIT (e.g. 0,1,2:0:-1 or 1:1234:100): the consumer is
// assigned those partitions (no group), seeks each to OFFSET and reads until every one of
// them reaches its end offset as of the start of the read (the last stable offset under
// read_committed), or LIMIT records (-1: no limit). The reads run one after another.
// Prints one line per record:
//   <read#> <partition> <offset> <timestamp type> <timestamp> <key> <value> <headers>
// where a byte string is "-" for null or "b:" and its base64, and headers are "." for none or
// comma-separated <base64 of the key's UTF-8>~<byte string>. Exits 1, saying so on stderr,
// when a read makes no progress for 60 s.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class TierReader {
    static String bytes(byte[] b) {
        return b == null ? "-" : "b:" + Base64.getEncoder().encodeToString(b);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], isolation = args[2];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("isolation.level", isolation);
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "none");
        props.put("client.id", "tier-reader");
        StringBuilder out = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            for (int n = 3; n < args.length; n++) {
                String[] spec = args[n].split(":");
                List<TopicPartition> tps = new ArrayList<>();
                for (String p : spec[0].split(",")) tps.add(new TopicPartition(topic, Integer.parseInt(p)));
                long offset = Long.parseLong(spec[1]);
                long limit = Long.parseLong(spec[2]);
                consumer.assign(tps);
                for (TopicPartition tp : tps) consumer.seek(tp, offset);
                Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
                long read = 0;
                long lastProgress = System.currentTimeMillis();
                while (limit < 0 || read < limit) {
                    boolean done = true;
                    for (TopicPartition tp : tps) {
                        if (consumer.position(tp, Duration.ofSeconds(30)) < end.get(tp)) done = false;
                    }
                    if (done) break;
                    if (System.currentTimeMillis() - lastProgress > 60_000) {
                        StringBuilder where = new StringBuilder();
                        for (TopicPartition tp : tps) {
                            where.append(" ").append(tp).append(" at ").append(consumer.position(tp))
                                .append(" of ").append(end.get(tp));
                        }
                        System.out.print(out);
                        System.err.println("TierReader: no progress for 60 s, read " + read + ":" + where);
                        System.exit(1);
                    }
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        lastProgress = System.currentTimeMillis();
                        if (limit >= 0 && read >= limit) break;
                        read++;
                        out.append(n - 3).append(' ').append(r.partition()).append(' ').append(r.offset())
                            .append(' ').append(r.timestampType().id).append(' ').append(r.timestamp())
                            .append(' ').append(bytes(r.key())).append(' ').append(bytes(r.value())).append(' ');
                        boolean first = true;
                        for (Header h : r.headers()) {
                            if (!first) out.append(',');
                            first = false;
                            out.append(Base64.getEncoder().encodeToString(h.key().getBytes("UTF-8")))
                                .append('~').append(bytes(h.value()));
                        }
                        if (first) out.append('.');
                        out.append('\n');
                    }
                }
            }
        }
        System.out.print(out);
        System.out.flush();
    }
}
