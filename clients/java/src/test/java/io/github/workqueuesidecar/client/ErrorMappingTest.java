package io.github.workqueuesidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every refusal in clients/error-mapping.tsv, the table all clients' tests share, becomes the
 * exception its java column names (no sidecar).
 */
class ErrorMappingTest {
  private static final Path TABLE = Path.of("..", "error-mapping.tsv");

  @TestFactory
  Stream<DynamicTest> everyRefusalBecomesTheExceptionTheSharedTableNames() throws IOException {
    List<String> lines = Files.readAllLines(TABLE);
    List<DynamicTest> tests = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i);
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      int number = i + 1;
      String[] f = line.split("\t", -1);
      assertEquals(8, f.length, "error-mapping.tsv:" + number + ": fields");
      String service = f[0];
      Status.Code code = Status.Code.valueOf(f[1]);
      String domain = f[2];
      String reason = f[3];
      String expected = f[7];
      tests.add(DynamicTest.dynamicTest("error-mapping.tsv:" + number + ": " + service + " " + code + " " + reason + " is a " + expected, () -> {
        ErrorInfo[] infos = domain.equals("-")
            ? new ErrorInfo[0]
            : new ErrorInfo[] {ErrorInfo.newBuilder().setDomain(domain).setReason(reason).build()};
        WorkqueueException raised = Errors.of("call", "127.0.0.1:1", Refusal.of(code, "refused", infos));
        Class<?> want = Class.forName(WorkqueueException.class.getPackageName() + "." + expected);
        assertEquals(want, raised.getClass(), "error-mapping.tsv:" + number);
        assertEquals(code, raised.code());
      }));
    }
    assertFalse(tests.isEmpty(), "error-mapping.tsv has no lines");
    return tests.stream();
  }
}
