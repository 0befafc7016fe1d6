// Apache Kafka's command-line tools, one after another in one JVM, so that a test suite pays
// for one JVM start and one warm-up instead of one for each tool run.
//
// Each line on stdin is a JSON request {"tool": main class, "args": [...], "input": text or
// null}; each answer is one JSON line on stdout {"rc": exit status, "stdout": ..., "stderr":
// ...}. A tool runs by its main class, as Kafka's bin/*.sh scripts run it. Its status is what
// it first passes to Kafka's Exit.exit (0 when main returns), and its output is what it prints
// to System.out, System.err and its log (a console logger following System.err) until then:
// what a tool would do after exiting (a finally block calling Exit.exit inside a catch of
// Throwable) is not heard. An empty line or the end of stdin ends the shell. Tools that call
// System.exit themselves (kafka-cluster, the verifiable producer and consumer) end the shell
// too: run those as processes of their own.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.utils.Exit;

public class ToolShell {
    /** Thrown in place of the JVM's exit, so that the shell outlives a tool. */
    static final class ToolExit extends RuntimeException {
        ToolExit(int status) {
            super("exit " + status, null, false, false);
        }
    }

    /** The status of the running tool's first exit, if it has exited. */
    static volatile Integer exited;

    static final PrintStream NOWHERE = new PrintStream(OutputStream.nullOutputStream());

    static void exit(int status) {
        synchronized (ToolShell.class) {
            if (exited == null) {
                exited = status;
                System.out.flush();
                System.err.flush();
                System.setOut(NOWHERE);
                System.setErr(NOWHERE);
            }
        }
        throw new ToolExit(status);
    }

    public static void main(String[] argv) throws Exception {
        ObjectMapper json = new ObjectMapper();
        PrintStream answers = System.out;
        InputStream stdin = System.in;
        PrintStream stderr = System.err;
        Exit.setExitProcedure((status, message) -> exit(status));
        Exit.setHaltProcedure((status, message) -> exit(status));
        // A tool's shutdown hooks (the console producer's close, which sends what it has
        // buffered) run when it is done, as at the exit of a process of its own.
        List<Thread> hooks = new ArrayList<>();
        Exit.setShutdownHookAdder((name, hook) -> hooks.add(new Thread(hook, name)));
        BufferedReader requests = new BufferedReader(new InputStreamReader(stdin, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null && !line.isBlank()) {
            JsonNode request = json.readTree(line);
            List<String> args = new ArrayList<>();
            request.path("args").forEach(a -> args.add(a.asText()));
            JsonNode input = request.path("input");
            byte[] in = input.isTextual() ? input.asText().getBytes(StandardCharsets.UTF_8) : new byte[0];
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            int status;
            exited = null;
            hooks.clear();
            System.setIn(new ByteArrayInputStream(in));
            System.setOut(toolOut);
            System.setErr(toolErr);
            try {
                status = run(request.path("tool").asText(), args.toArray(new String[0]));
                if (exited != null) {
                    status = exited;
                }
                System.setOut(toolOut);
                System.setErr(toolErr);
                for (Thread hook : hooks) {
                    hook.start();
                }
                for (Thread hook : hooks) {
                    hook.join(60_000);
                }
            } finally {
                System.out.flush();
                System.err.flush();
                System.setIn(stdin);
                System.setOut(answers);
                System.setErr(stderr);
            }
            ObjectNode answer = json.createObjectNode();
            answer.put("rc", status);
            answer.put("stdout", out.toString(StandardCharsets.UTF_8));
            answer.put("stderr", err.toString(StandardCharsets.UTF_8));
            answers.println(json.writeValueAsString(answer));
            answers.flush();
        }
    }

    static int run(String tool, String[] args) {
        try {
            Method main = Class.forName(tool).getMethod("main", String[].class);
            main.invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (exited != null) {
                return exited;
            }
            // What the JVM prints for an exception that leaves main, and its exit status.
            StringWriter trace = new StringWriter();
            cause.printStackTrace(new PrintWriter(trace));
            System.err.print("Exception in thread \"main\" " + trace);
            return 1;
        } catch (ReflectiveOperationException e) {
            System.err.println("no such tool: " + tool + " (" + e + ")");
            return 1;
        }
    }
}
