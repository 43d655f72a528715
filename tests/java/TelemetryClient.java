// A Java KafkaProducer (or KafkaConsumer) with client metrics push (KIP-714,
// enable.metrics.push=true, the default), for tests/test_client_metrics.py, run as a single-file
// source program (java -cp <kafka tools classpath> TelemetryClient.java ...).
//
//   TelemetryClient <bootstrap> <producer|consumer|admin> <client.id> <topic> <seconds>
//
// Prints "instance <id>" as soon as the client knows its client instance id
// (clientInstanceId(), which asks the broker with GetTelemetrySubscriptions), then keeps
// producing one record every 100 ms (or polling the topic, or describing the cluster) for
// <seconds>, so that the client pushes its metrics, and prints "done" after closing.
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TelemetryClient {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], mode = args[1], clientId = args[2], topic = args[3];
        long until = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000;
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", clientId);
        props.put("enable.metrics.push", "true");
        if (mode.equals("producer")) {
            props.put("key.serializer", StringSerializer.class.getName());
            props.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
                announce(producer.clientInstanceId(Duration.ofSeconds(30)));
                for (int i = 0; System.currentTimeMillis() < until; i++) {
                    producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
                    Thread.sleep(100);
                }
            }
        } else if (mode.equals("consumer")) {
            props.put("group.id", clientId + "-group");
            props.put("auto.offset.reset", "earliest");
            props.put("key.deserializer", StringDeserializer.class.getName());
            props.put("value.deserializer", StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
                consumer.subscribe(List.of(topic));
                consumer.poll(Duration.ofMillis(100));
                announce(consumer.clientInstanceId(Duration.ofSeconds(30)));
                while (System.currentTimeMillis() < until) {
                    consumer.poll(Duration.ofMillis(200));
                }
            }
        } else {
            try (Admin admin = Admin.create(props)) {
                announce(admin.clientInstanceId(Duration.ofSeconds(30)));
                while (System.currentTimeMillis() < until) {
                    admin.describeCluster().nodes().get();
                    Thread.sleep(200);
                }
            }
        }
        System.out.println("done");
        System.out.flush();
    }

    private static void announce(Uuid id) {
        System.out.println("instance " + id);
        System.out.flush();
    }
}
