// Kafka's Java Admin describing SCRAM credentials, for tests/test_scram_credentials.py, run as
// a single-file source program (java -cp <kafka tools classpath> ScramAdmin.java ...).
//
//   ScramAdmin <bootstrap> [user ...]       no users: every user with a credential
//
// Prints one line per credential, "<user> <mechanism> <iterations>", and for a user the
// broker refuses "<user> ERROR <exception class>: <message>".
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeUserScramCredentialsResult;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

public class ScramAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        List<String> users = Arrays.asList(args).subList(1, args.length);
        try (Admin admin = Admin.create(props)) {
            DescribeUserScramCredentialsResult result =
                users.isEmpty() ? admin.describeUserScramCredentials() : admin.describeUserScramCredentials(users);
            if (users.isEmpty()) {
                Map<String, UserScramCredentialsDescription> all = result.all().get();
                for (String user : all.keySet().stream().sorted().toList()) {
                    print(all.get(user));
                }
                return;
            }
            for (String user : users) {
                try {
                    print(result.description(user).get());
                } catch (ExecutionException e) {
                    System.out.println(user + " ERROR " + e.getCause().getClass().getSimpleName() + ": "
                                       + e.getCause().getMessage());
                }
            }
        }
    }

    static void print(UserScramCredentialsDescription d) {
        for (ScramCredentialInfo info : d.credentialInfos()) {
            System.out.println(d.name() + " " + info.mechanism().mechanismName() + " " + info.iterations());
        }
    }
}
