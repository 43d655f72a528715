// Throughput of Java's KafkaShareConsumer for benches/bench_share_client.py, run as a
// single-file source program (java -cp <kafka tools classpath> ShareBench.java ...).
//
//   ShareBench <bootstrap> <group> <topic> <records> [max.poll.records]
//
// Implicit acknowledgement (every record of a poll accepted by the next poll), as the
// Python side of the benchmark does. Consumes until <records> records, then prints
//   RESULT <records> <seconds from subscribe> <seconds from the first record>
// and closes (which accepts the last poll's records).
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        long want = Long.parseLong(args[3]);
        String maxPoll = args.length > 4 ? args[4] : "500";
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", "implicit");
        props.put("max.poll.records", maxPoll);
        try (KafkaShareConsumer<byte[], byte[]> consumer =
                 new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            long t0 = System.nanoTime();
            consumer.subscribe(List.of(topic));
            long first = -1, count = 0, bytes = 0;
            long deadline = t0 + Duration.ofMinutes(5).toNanos();
            while (count < want && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    if (first < 0) first = System.nanoTime();
                    count++;
                    bytes += r.value() == null ? 0 : r.value().length;
                }
            }
            long end = System.nanoTime();
            System.out.println("RESULT " + count + " " + (end - t0) / 1e9 + " " + (end - first) / 1e9);
            System.out.flush();
        }
    }
}
