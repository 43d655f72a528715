// A KafkaShareConsumer for tests/test_share_groups_java.py, run as a single-file source
// program (java -cp <kafka tools classpath> ShareWorker.java ...).
//
//   ShareWorker <bootstrap> <group> <topic> <mode> <idle-ms> [process-ms] [timed]
//
// mode accept:  acknowledges every record ACCEPT (explicit mode, commitSync per poll)
//      release: acknowledges every record RELEASE (it comes back until the delivery limit)
//      hold:    takes one non-empty poll and then never acknowledges nor polls again (the
//               test kills it with SIGKILL; its acquisition locks have to run out)
// Prints one line per record: "<partition> <offset> <value> <delivery count>", flushed at
// once; exits after idle-ms without records (accept, release). With "timed": each record line
// ends with the wall-clock ms it was received at, and before each commitSync a line
// "commit <ms> <offset>,<offset>,..." names what it acknowledges (the key-order checks).
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareWorker {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], mode = args[3];
        long idleMs = Long.parseLong(args[4]);
        long processMs = args.length > 5 ? Long.parseLong(args[5]) : 0;
        boolean timed = args.length > 6 && args[6].equals("timed");
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("max.poll.records", "10");
        try (KafkaShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long lastRecord = System.currentTimeMillis();
            while (System.currentTimeMillis() - lastRecord < idleMs) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                long received = System.currentTimeMillis();
                StringBuilder acked = new StringBuilder();
                for (ConsumerRecord<String, String> r : records) {
                    System.out.println(r.partition() + " " + r.offset() + " " + r.value() + " "
                        + r.deliveryCount().map(String::valueOf).orElse("-") + (timed ? " " + received : ""));
                    acked.append(acked.length() == 0 ? "" : ",").append(r.offset());
                    System.out.flush();
                    if (processMs > 0) Thread.sleep(processMs);
                    if (!mode.equals("hold")) {
                        consumer.acknowledge(r, mode.equals("release") ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    }
                }
                if (!records.isEmpty()) {
                    lastRecord = System.currentTimeMillis();
                    if (mode.equals("hold")) {
                        System.out.println("holding");
                        System.out.flush();
                        Thread.sleep(Long.MAX_VALUE);
                    }
                    if (timed) {
                        System.out.println("commit " + System.currentTimeMillis() + " " + acked);
                        System.out.flush();
                    }
                    consumer.commitSync();
                }
            }
        }
    }
}
