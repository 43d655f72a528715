// A classic-group KafkaConsumer with the CooperativeStickyAssignor, for
// tests/test_cooperative_sticky.py, run as a single-file source program
// (java -cp <kafka tools classpath> CoopWorker.java ...).
//
//   CoopWorker <bootstrap> <group> <topic> <client-id> [classic|consumer]
//
// With "consumer" (tests/test_consumer_group_persistence.py) the group uses the KIP-848
// protocol instead: the broker assigns, and session and heartbeat are the broker's.
// Prints, flushed at once, one line per event with the wall clock in ms:
//   assign <ms> <p,p,...|->     onPartitionsAssigned (the partitions added)
//   revoke <ms> <p,p,...|->     onPartitionsRevoked
//   lost <ms> <p,p,...|->       onPartitionsLost
//   record <partition> <offset> <value>
// Auto-commit is on. A line "stop" on stdin (or its end) closes the consumer, which
// leaves the group; then it prints "closed" and exits.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class CoopWorker {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String parts(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) return "-";
        return tps.stream().map(tp -> String.valueOf(tp.partition())).sorted().collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], clientId = args[3];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", clientId);
        String protocol = args.length > 4 ? args[4] : "classic";
        props.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            props.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
            props.put("session.timeout.ms", "10000");
            props.put("heartbeat.interval.ms", "200");
        }
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "true");
        props.put("auto.commit.interval.ms", "200");
        AtomicBoolean stop = new AtomicBoolean(false);
        KafkaConsumer<String, String> consumer =
            new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception e) { }
            stop.set(true);
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                say("revoke " + System.currentTimeMillis() + " " + parts(tps));
            }
            public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                say("assign " + System.currentTimeMillis() + " " + parts(tps));
            }
            public void onPartitionsLost(Collection<TopicPartition> tps) {
                say("lost " + System.currentTimeMillis() + " " + parts(tps));
            }
        });
        try {
            while (!stop.get()) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    say("record " + r.partition() + " " + r.offset() + " " + r.value());
                }
            }
        } catch (WakeupException e) {
            // stopping
        } finally {
            consumer.close();
        }
        say("closed");
    }
}
